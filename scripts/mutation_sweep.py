"""Screen mutants cheaply: generate them with mutmut, pick some, screen them in one pytest process.

    python -m scripts.mutation_sweep --only 'gateway.templates.*'          # a package
    python -m scripts.mutation_sweep --changed-since 4776b3d               # what changed since
    python -m scripts.mutation_sweep --changed-since main --dry-run        # only list them
    make mutate-changed BASE=<rev>                                          # the same, niced

Steps: mutmut generates `mutants/` (its working copy; a file is generated again only when
its source is newer), without mutmut's coverage run over the whole suite; the mutants are
chosen by name (`--only`, fnmatch patterns on mutmut's names such as
`gateway.matching.fast.x__check_test__mutmut_8`) and/or by function: `--changed-since REV`
keeps the functions whose source differs from REV's (mutmut's own per-function hash of the
file at REV, following renames; a file new since REV counts whole). They are screened with
`scripts/mutation_screen.py` (collect once, fork a child per mutant) against the tests of
their package (`TESTS` below, or `--tests`), and the verdicts are written back into
mutmut's `.meta` files, so `python -m scripts.mutation_summary` counts them and a later
`mutmut run` does not check them again. The survivors are printed: for a change, those are
the mutants it has to kill or list as equivalent (docs/testing.md).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from scripts.mutation_summary import SETTLEMENT

#: The fast tests that exercise each mutated package, those most likely to fail first (a
#: child stops at its first failing test). Longest prefix wins; anything else gets the
#: whole fast suite.
_RUNTIME = (  # the quick route tests first; the CLI in a subprocess and the fuzz test last
    "tests/unit/runtime/test_route*.py", "tests/unit/runtime/test_[!dl]*.py",
    "tests/unit/runtime/test_ledger.py", "tests/unit/runtime/test_deadletters.py",
    "tests/unit/observability/test_sender_secrets.py", "tests/unit/tap/test_tap_route.py",
    "tests/unit/tap/test_tap_units.py", "tests/unit/runtime/test_daemon.py",
    "tests/unit/runtime/test_lone_surrogates.py", "tests/fuzz/test_fuzz_route.py",
)
TESTS: dict[str, tuple[str, ...]] = {
    "gateway.matching": (
        "tests/unit/core/test_matching_*.py", "tests/unit/core/test_matcher*.py",
        "tests/unit/core/test_lint*.py", "tests/unit/core/test_template_oracle.py",
        "tests/unit/core/test_spec_rules_rc2.py", "tests/unit/core/test_real_catalogs.py",
    ),
    "gateway.envelope": (
        "tests/unit/core/test_envelope_*.py", "tests/unit/core/test_render*.py",
        "tests/unit/core/test_fastrender_generated.py", "tests/unit/core/test_native_render.py",
        "tests/unit/core/test_outgoing*.py", "tests/unit/core/test_pinned_ids.py",
        "tests/unit/core/test_identity_readers.py", "tests/unit/core/test_convert_batch.py",
        "tests/unit/adapters/test_encoded_headers.py", "tests/unit/core/test_spec_conformance.py",
        "tests/unit/core/test_spec_examples.py", "tests/unit/core/test_real_catalogs.py",
    ),
    "gateway.templates.template": (
        "tests/unit/test_templates.py", "tests/unit/test_templates_parts_and_regexes.py",
        "tests/unit/core/test_template_oracle.py", "tests/unit/test_templates_linear.py",
        "tests/unit/core/test_lint_templates.py", "tests/unit/core/test_matching_matcher.py",
    ),
    "gateway.templates.match": (
        "tests/unit/test_templates_linear.py", "tests/unit/test_templates.py",
        "tests/unit/test_templates_parts_and_regexes.py", "tests/unit/core/test_template_oracle.py",
        "tests/unit/core/test_lint_templates.py",
    ),
    "gateway.envelope.partitioning": ("tests/unit/runtime/test_partition_keys.py",),
    "gateway.json.body": ("tests/unit/core/test_jsonbody.py",),
    "gateway.cloudevents.bindings.headers": (
        "tests/unit/cloudevents", "tests/unit/adapters/test_encoded_headers.py",
    ),
    "gateway.runtime": _RUNTIME,
    "gateway.runtime.ledger": ("tests/unit/runtime/test_ledger.py", *_RUNTIME),
    "gateway.runtime.settler": (
        "tests/unit/runtime/test_settlement.py", "tests/unit/runtime/test_ledger.py", *_RUNTIME),
    "gateway.runtime.deadletters": (
        "tests/unit/runtime/test_deadletters.py", "tests/unit/runtime/test_route_failure_paths.py",
        "tests/unit/runtime/test_route_undecodable.py", *_RUNTIME),
    "gateway.runtime.stats": (
        "tests/unit/runtime/test_route_metrics.py", "tests/unit/runtime/test_stalls.py",
        *_RUNTIME),
    "gateway.runtime.stalls": (
        "tests/unit/runtime/test_stalls.py", "tests/unit/runtime/test_route_stalls.py", *_RUNTIME),
    "gateway.runtime.reply": (
        "tests/unit/runtime/test_reply.py", "tests/unit/runtime/test_reply_hand_back.py",
        *_RUNTIME),
    "gateway.runtime.resend": (
        "tests/unit/runtime/test_resend.py", "tests/unit/runtime/test_retry.py", *_RUNTIME),
    "gateway.runtime.backlog": ("tests/unit/runtime/test_backlog_watch.py", *_RUNTIME),
    "gateway.heap": ("tests/unit/core/test_heap.py", "tests/unit/core/test_heap_calls.py"),
    "gateway.runtime.window": ("tests/unit/runtime/test_window.py", *_RUNTIME),
    "gateway.runtime.sender": ("tests/unit/runtime/test_sender_resend.py", *_RUNTIME),
    "gateway.runtime.tapping": ("tests/unit/tap/test_tap_route.py", *_RUNTIME),
    "gateway.ports.inbox": ("tests/unit/ports/test_inbox.py",),
    "gateway.ports.pending": ("tests/unit/ports/test_pending.py",),
    "adapters.kafka.commits": (
        "tests/unit/adapters/test_kafka_commits.py", "tests/unit/adapters/test_kafka_fetch.py",
    ),
    "adapters.nats.acks": ("tests/unit/adapters/test_nats_acks.py",),
    # The consumers' settlement functions (mutation_summary.SETTLEMENT); their other
    # functions are not screened (the integration tests cover them against brokers).
    "adapters.mqtt.consumer": ("tests/unit/adapters/test_consumer_settlement.py",),
    "adapters.nats.consumer": ("tests/unit/adapters/test_consumer_settlement.py",),
    "adapters.amqp.consumer": (
        "tests/unit/adapters/test_amqp_bridge.py", "tests/unit/adapters/test_amqp_settlement.py",
    ),
    "adapters.http.consumer": ("tests/unit/adapters/test_http_settlement.py",),
}
FAST_SUITE = ("tests/unit", "tests/fuzz")
KILLED_CODE, SURVIVED_CODE = 1, 0  # what mutmut writes for a failing / a passing test run


def generate() -> None:
    """mutmut's mutant generation alone (no stats run over the whole suite)."""
    from mutmut.__main__ import create_mutants
    from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir

    Path("mutants").mkdir(exist_ok=True)
    with contextlib.redirect_stdout(sys.stderr):  # mutmut names each file it copies
        copy_src_dir()
        copy_also_copy_files()
        create_mutants(1)


def metas() -> dict[Path, dict[str, object]]:
    """Source path -> its mutmut meta data."""
    found = {}
    for meta in sorted(Path("mutants").rglob("*.py.meta")):
        source = meta.relative_to("mutants").with_suffix("")
        found[source] = json.loads(meta.read_text())
    return found


def function_of(mutant: str) -> str:
    """`gateway.x.xǁCǁf__mutmut_3` -> `xǁCǁf` (mutmut's mangled function name)."""
    return mutant.partition("__mutmut_")[0].rpartition(".")[2]


def renamed_since(base: str) -> dict[str, str]:
    """Current path -> its path at `base`, for the files git sees as renamed."""
    out = subprocess.run(["git", "diff", "--name-status", "-M", base, "--"],
                         capture_output=True, text=True, check=True).stdout
    renames = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if parts[0].startswith("R") and len(parts) == 3:
            renames[parts[2]] = parts[1]
    return renames


def changed_functions(base: str, sources: dict[Path, dict[str, object]]) -> set[tuple[Path, str]]:
    """(source, mangled function) whose mutmut hash differs from the file's at `base`."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    renames = renamed_since(base)
    touched = set(subprocess.run(["git", "diff", "--name-only", "-M", base, "--"],
                                 capture_output=True, text=True, check=True).stdout.split())
    touched |= set(subprocess.run(["git", "ls-files", "--others", "--exclude-standard"],
                                  capture_output=True, text=True, check=True).stdout.split())
    changed = set()
    for source, meta in sources.items():
        if str(source) not in touched:
            continue  # the same text as at base: no function of it changed
        hashes: dict[str, str] = meta.get("hash_by_function_name", {})  # type: ignore[assignment]
        old_path = renames.get(str(source), str(source))
        shown = subprocess.run(["git", "show", f"{base}:{old_path}"],
                               capture_output=True, text=True)
        old = mutate_file_contents(old_path, shown.stdout).hash_by_function_name \
            if shown.returncode == 0 else {}
        changed |= {(source, f) for f, h in hashes.items() if old.get(f) != h}
    return changed


def tests_for(mutant: str) -> tuple[str, ...]:
    prefixes = [p for p in TESTS if mutant.startswith(p + ".")]
    return TESTS[max(prefixes, key=len)] if prefixes else FAST_SUITE


def screen(names: list[str], tests: tuple[str, ...], timeout: float) -> dict[str, str]:
    """Mutant -> the screen's line for it (`killed NAME TEST` / `survived NAME`)."""
    mutants = Path("mutants")
    # In the order given (a child stops at its first failing test: the likeliest first),
    # each file once.
    paths = list(dict.fromkeys(
        str(p.relative_to(mutants)) for pattern in tests
        for p in (sorted(mutants.glob(pattern)) if "*" in pattern else [mutants / pattern])
        if p.exists()))
    with tempfile.TemporaryDirectory() as tmp:
        listing, result = Path(tmp) / "names.txt", Path(tmp) / "result.txt"
        listing.write_text("\n".join(names))
        env = dict(os.environ, MUTLIST=str(listing), MUTOUT=str(result))
        # A child that reaches the deadline counts as killed: far above what the slowest
        # test set takes on a loaded host, the per-test timeout bounds a hung mutant.
        env.setdefault("MUTATION_SCREEN_DEADLINE", "900")
        command = ["nice", "-n", "19", sys.executable, "-m", "pytest",
                   "-p", "scripts.mutation_screen", "-q", "-p", "no:cacheprovider",
                   "--hypothesis-seed=0", "--hypothesis-profile=mutation",
                   f"--timeout={timeout:g}", *paths]
        subprocess.run(command, cwd=mutants, env=env, stdout=subprocess.DEVNULL, check=False)
        lines = result.read_text().splitlines() if result.exists() else []
    if lines and lines[0].startswith("BASELINE FAILS"):
        raise SystemExit(f"the tests fail without a mutant: {lines[0]} ({' '.join(paths)})")
    return {line.split()[1]: line for line in lines if len(line.split()) >= 2}


def record(verdicts: dict[str, str]) -> None:
    """Write the verdicts into mutmut's meta files (what mutation_summary reads)."""
    for meta in Path("mutants").rglob("*.py.meta"):
        data = json.loads(meta.read_text())
        codes = data["exit_code_by_key"]
        hits = [m for m in verdicts if m in codes]
        for mutant in hits:
            survived = verdicts[mutant].startswith("survived")
            codes[mutant] = SURVIVED_CODE if survived else KILLED_CODE
        if hits:
            meta.write_text(json.dumps(data, indent=4))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=[], help="fnmatch patterns on mutant names")
    parser.add_argument("--settlement", action="store_true",
                        help="the consumers' settlement functions (mutation_summary.SETTLEMENT)")
    parser.add_argument("--changed-since", metavar="REV", help="only functions changed since REV")
    parser.add_argument("--tests", nargs="*", help="test paths (default: the package's, see TESTS)")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds a test may take")
    parser.add_argument("--unchecked", action="store_true", help="skip mutants with a verdict")
    parser.add_argument("--sample", type=int, help="screen only this many, evenly spread")
    parser.add_argument("--chunk", type=int, default=40, help="mutants per pytest process")
    parser.add_argument("--dry-run", action="store_true", help="list the mutants, screen nothing")
    args = parser.parse_args()

    generate()
    sources = metas()
    names = [m for meta in sources.values() for m in meta["exit_code_by_key"]]  # type: ignore[attr-defined]
    codes = {m: c for meta in sources.values() for m, c in meta["exit_code_by_key"].items()}  # type: ignore[attr-defined]
    if args.only or args.settlement:
        settlement = {f for functions in SETTLEMENT.values() for f in functions}
        names = [m for m in names
                 if any(fnmatch.fnmatchcase(m, p) for p in args.only)
                 or (args.settlement and m.partition("__mutmut_")[0] in settlement)]
    if args.changed_since:
        changed = changed_functions(args.changed_since, sources)
        module_of = {str(s.with_suffix("")).replace("/", ".").replace(".__init__", ""): s
                     for s in sources}
        names = [m for m in names
                 if (module_of.get(m.partition("__mutmut_")[0].rpartition(".")[0]), function_of(m))
                 in changed]
    if args.sample and len(names) > args.sample:
        step = len(names) / args.sample  # every step-th: spread over the functions
        names = [names[int(i * step)] for i in range(args.sample)]
    if args.unchecked:  # (after sampling: a resumed sample is the same sample)
        names = [m for m in names if codes.get(m) is None]
    if args.dry_run:
        print("\n".join(names))
        return 0

    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for mutant in names:
        groups[tuple(args.tests) if args.tests else tests_for(mutant)].append(mutant)
    survivors = []
    for tests, group in groups.items():
        print(f"screening {len(group)} mutants against {' '.join(tests)}", flush=True)
        # In chunks, each recorded when done: an interrupted sweep keeps what it screened.
        for start in range(0, len(group), args.chunk):
            chunk = group[start:start + args.chunk]
            pause = os.environ.get("MUTATION_SCREEN_PAUSE")
            while pause and Path(pause).exists():  # no new pytest process meanwhile
                time.sleep(5)
            verdicts = screen(chunk, tests, args.timeout)
            record(verdicts)
            alive = [m for m in chunk if verdicts.get(m, "").startswith("survived")]
            survivors += alive
            print(f"  {start + len(chunk)}/{len(group)}: {len(alive)} survived", *alive,
                  sep="\n    ", flush=True)
            unscreened = [m for m in chunk if m not in verdicts]
            if unscreened:
                print(f"  {len(unscreened)} not screened (the screen stopped): {unscreened[0]}")
    print(f"{len(names)} mutants screened, {len(survivors)} survived")
    print("\n".join(survivors))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
