"""bench/bench_routes.py's bookkeeping of partial runs (no brokers): a run that timed out
is marked failed, shows delivered/sent, and is never picked as the best of the repeats."""

import argparse

from bench.bench_routes import Result, best, print_table, throughput_row


def _run(rate: float, received: int, messages: int = 1000, subject: str = "gateway") -> Result:
    return Result("mqtt-kafka", subject, messages, received, 1.0, rate, 0.1,
                  failed=received < messages)


def test_a_partial_run_is_never_the_best() -> None:
    partial, complete = _run(9000.0, 400), _run(3000.0, 1000)
    assert best([partial, complete], lambda r: r.msgs_per_s) is complete
    assert best([complete, partial], lambda r: r.msgs_per_s) is complete


def test_when_every_run_failed_the_furthest_is_reported_as_failed() -> None:
    chosen = best([_run(9000.0, 100), _run(10.0, 700)], lambda r: r.msgs_per_s)
    assert chosen.failed and chosen.delivered == "700/1000"


def test_the_table_marks_a_failed_route_and_shows_delivered_over_sent(capsys) -> None:
    row = throughput_row("mqtt-kafka", _run(5000.0, 1000, subject="bridge"), _run(9000.0, 400))
    assert row["failed"] and row["ratio"] == 0.0
    print_table([row], [], argparse.Namespace(messages=1000, repeat=2, latency_seconds=5.0))
    line = capsys.readouterr().out.splitlines()[-1]
    assert "400/1000" in line and "1000/1000" in line and line.endswith("FAILED")


def test_a_complete_route_gets_its_ratio() -> None:
    row = throughput_row("mqtt-kafka", _run(5000.0, 1000, subject="bridge"), _run(4500.0, 1000))
    assert not row["failed"] and abs(row["ratio"] - 0.9) < 1e-9
