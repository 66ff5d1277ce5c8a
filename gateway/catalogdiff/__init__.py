"""What a change to a catalog does, before it ships (`xrgw diff OLD NEW`):

- `definitions`: the message definitions added, removed or changed, by xid, field by
  field;
- `findings`: the lint findings (overlapping pairs with their witness, warnings) NEW has
  and OLD had not, and those it resolved;
- `replay`: what each replayed record does under OLD and under NEW;
- `records`: the replay inputs (native records, dead letters, Spark dead-letter lines);
- `verdict`: whether the change is for the worse (the command's exit code).

The text and JSON forms are the command's (`gateway/commands/diff.py`).
"""
