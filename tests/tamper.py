#!/usr/bin/env python3
"""Edits one field of a JSON document for the analyzer tests.

usage: tamper.py IN OUT OP PATH [JSON_VALUE]
  OP  del   remove the field at PATH
      set   replace the field at PATH with JSON_VALUE
      add   add a new key PATH (its parent must exist) with JSON_VALUE
  PATH  dot-separated keys and array indices, e.g. cases.3.online_vs_reference.nmse
Writes OUT with the same key order; exits 2 if PATH does not exist.
"""
import json
import sys


def walk(doc, parts):
    for p in parts:
        doc = doc[int(p)] if isinstance(doc, list) else doc[p]
    return doc


def main():
    src, dst, op, path = sys.argv[1:5]
    value = json.loads(sys.argv[5]) if len(sys.argv) > 5 else None
    with open(src) as f:
        doc = json.load(f)
    parts = path.split(".")
    parent = walk(doc, parts[:-1])
    last = parts[-1]
    key = int(last) if isinstance(parent, list) else last
    if op == "del":
        del parent[key]
    elif op == "set":
        if isinstance(parent, dict) and key not in parent:
            sys.exit("tamper.py: no field " + path)
        parent[key] = value
    elif op == "add":
        if key in parent:
            sys.exit("tamper.py: field exists " + path)
        parent[key] = value
    else:
        sys.exit("tamper.py: unknown op " + op)
    with open(dst, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
