"""expo_check.py FILE: a strict check of Prometheus's text exposition format 0.0.4, for the tests
when promtool is absent (the rules: https://prometheus.io/docs/instrumenting/exposition_formats/
and .../practices/naming/). Prints one line per problem and exits 1, or prints the samples as
'name{k=v,...} value' lines (labels sorted, values unescaped) and exits 0."""
import math
import re
import sys

NAME = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*')
LABEL = re.compile(r'[a-zA-Z_][a-zA-Z0-9_]*')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}

problems, samples = [], []
help_of, type_of, seen_series, done_families = {}, {}, set(), set()
current = None


def bad(n, msg):
    problems.append("line %d: %s" % (n, msg))


def parse_labels(n, s, i):
    """s[i] == '{'; returns (labels, index after '}')."""
    labels = {}
    i += 1
    while True:
        if i < len(s) and s[i] == '}':
            return labels, i + 1
        m = LABEL.match(s, i)
        if not m:
            bad(n, "bad label name at column %d" % i)
            return labels, len(s)
        name = m.group(0)
        if name.startswith("__"):
            bad(n, "label %s: names starting with __ are reserved" % name)
        i = m.end()
        if s[i:i + 2] != '="':
            bad(n, "label %s: expected =\"" % name)
            return labels, len(s)
        i += 2
        val = []
        while i < len(s) and s[i] != '"':
            if s[i] == '\\':
                nxt = s[i + 1:i + 2]
                if nxt not in ('\\', '"', 'n'):
                    bad(n, "label %s: bad escape \\%s" % (name, nxt))
                val.append({'\\': '\\', '"': '"', 'n': '\n'}.get(nxt, nxt))
                i += 2
            else:
                val.append(s[i])
                i += 1
        if i >= len(s):
            bad(n, "label %s: unterminated value" % name)
            return labels, len(s)
        i += 1
        if name in labels:
            bad(n, "label %s given twice" % name)
        labels[name] = "".join(val)
        if i < len(s) and s[i] == ',':
            i += 1
        elif i < len(s) and s[i] != '}':
            bad(n, "expected , or } after label %s" % name)
            return labels, len(s)


text = open(sys.argv[1], encoding="utf-8").read()
if text and not text.endswith("\n"):
    problems.append("the last line does not end with a newline")
for n, line in enumerate(text.split("\n")[:-1], 1):
    if line.startswith("#"):
        parts = line.split(" ", 3)
        if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
            name = parts[2]
            if not NAME.fullmatch(name):
                bad(n, "bad metric name %r" % name)
            d = help_of if parts[1] == "HELP" else type_of
            if name in d:
                bad(n, "second %s for %s" % (parts[1], name))
            if parts[1] == "TYPE":
                if len(parts) != 4 or parts[3] not in TYPES:
                    bad(n, "bad TYPE line")
                elif any(s[0] == name for s in samples):
                    bad(n, "TYPE of %s after its samples" % name)
                if len(parts) == 4:
                    d[name] = parts[3]
            else:
                d[name] = parts[3] if len(parts) == 4 else ""
                if re.search(r'\\[^\\n]', d[name]):
                    bad(n, "bad escape in HELP")
        continue
    if not line.strip():
        bad(n, "empty line")
        continue
    m = NAME.match(line)
    if not m:
        bad(n, "not a sample: %r" % line[:80])
        continue
    name, i = m.group(0), m.end()
    labels = {}
    if i < len(line) and line[i] == '{':
        labels, i = parse_labels(n, line, i)
    rest = line[i:]
    if not rest.startswith(" "):
        bad(n, "expected a space before the value")
        continue
    fields = rest.split()
    if len(fields) not in (1, 2):
        bad(n, "expected VALUE [TIMESTAMP]")
        continue
    try:
        v = float(fields[0]) if fields[0] not in ("+Inf", "-Inf", "NaN") else float(fields[0].replace("Inf", "inf"))
    except ValueError:
        bad(n, "bad value %r" % fields[0])
        continue
    family = name
    if family not in type_of:
        bad(n, "%s has no TYPE line before it" % name)
    if family not in help_of:
        bad(n, "%s has no HELP line" % name)
    if current != family:
        if family in done_families:
            bad(n, "the samples of %s are not together" % family)
        if current:
            done_families.add(current)
        current = family
    t = type_of.get(family)
    if t == "counter":
        if not name.endswith("_total"):
            bad(n, "counter %s does not end in _total" % name)
        if v < 0 or math.isnan(v):
            bad(n, "counter %s is negative" % name)
    if t == "gauge" and name.endswith("_total"):
        bad(n, "gauge %s ends in _total (a counter's suffix)" % name)
    if name.endswith("_ratio") and not (0 <= v <= 1):
        bad(n, "%s = %s is not a ratio 0..1" % (name, v))
    key = (name, tuple(sorted(labels.items())))
    if key in seen_series:
        bad(n, "series given twice: %s" % line[:120])
    seen_series.add(key)
    samples.append((name, labels, fields[0]))

if problems:
    print("\n".join(problems))
    sys.exit(1)
for name, labels, v in samples:
    print("%s{%s} %s" % (name, ",".join("%s=%s" % kv for kv in sorted(labels.items())), v))
