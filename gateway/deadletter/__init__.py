"""Dead letters: why a message was not delivered, and the letter that carries it back.

    reasons   the reason codes (`xrgw-reason`, metric labels, reports)
    format    the original message plus the reason and explanation as `xrgw-*` metadata of
              the dead-letter endpoint's protocol; `original_record` reads one back
"""
