# abi_facts.awk: lists every ABI fact a hand-written header declares, as macro calls that
# tests/unit/abi_check.c turns into _Static_asserts against the vendor header:
#   VGPU_ABI_ENUM(NAME)      an enumerator or an integer #define
#   VGPU_ABI_SIZE(TYPE)      a typedef'd struct, union or enum
#   VGPU_ABI_OFF(TYPE, f)    each direct member of it (nested anonymous aggregates by their
#                            member name only)
# It understands the layout our headers use: one member per line (or "type a, b;"), enumerators
# written "NAME = value", typedef struct/union closed by "} NAME;" on its own line.
function strip(s) { sub(/\/\/.*/, "", s); gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, "", s); return s }
function member(line,   n, parts, i, m) {
    sub(/;.*/, "", line)
    if (line ~ /\(/) return           # function pointer members: not checked
    # "type a, b[2]" -> a, b: the declarators after the type
    n = split(line, parts, ",")
    for (i = 1; i <= n; i++) {
        m = parts[i]
        sub(/\[[^]]*\][ \t]*$/, "", m)
        sub(/\[.*$/, "", m)
        if (match(m, /[A-Za-z_][A-Za-z0-9_]*[ \t]*$/)) {
            m = substr(m, RSTART, RLENGTH); gsub(/[ \t]/, "", m)
            members[++nmembers] = m
        }
    }
}
BEGIN { incomment = 0 }
{
    line = $0
    # multi-line comments
    if (incomment) { if (line ~ /\*\//) { sub(/.*\*\//, "", line); incomment = 0 } else next }
    line = strip(line)
    if (line ~ /\/\*/) { sub(/\/\*.*/, "", line); incomment = 1 }

    if (line ~ /^[ \t]*#[ \t]*define[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]+\(?(0x[0-9A-Fa-f]+|[0-9]+)[uUlL]*\)?[ \t]*$/) {
        split(line, w, /[ \t]+/); name = (w[1] == "" ? w[3] : w[2])
        if (name !~ /^_/ && name !~ /_H$/ && name !~ /^VGPU_/) print "VGPU_ABI_ENUM(" name ")"
        next
    }
    if (line ~ /^[ \t]*typedef[ \t]+enum/) { inenum = 1 }
    if (inenum) {
        if (match(line, /^[ \t]*[A-Za-z_][A-Za-z0-9_]*[ \t]*=/)) {
            e = substr(line, RSTART, RLENGTH); gsub(/[ \t=]/, "", e)
            print "VGPU_ABI_ENUM(" e ")"
        }
        if (line ~ /}/) {
            t = line; sub(/^.*\}[ \t]*/, "", t); sub(/[ \t]*;.*/, "", t)
            if (t ~ /^[A-Za-z_][A-Za-z0-9_]*$/) print "VGPU_ABI_SIZE(" t ")"
            inenum = 0
        }
        next
    }
    if (line ~ /^[ \t]*typedef[ \t]+(struct|union)[^;]*\{/) { depth = 1; nmembers = 0; next }
    if (depth > 0) {
        opens = gsub(/\{/, "{", line); closes = gsub(/\}/, "}", line)
        if (closes > 0 && depth + opens - closes == 0) {
            t = line; sub(/^.*\}[ \t]*/, "", t); sub(/[ \t]*;.*/, "", t)
            if (t ~ /^[A-Za-z_][A-Za-z0-9_]*$/) {
                print "VGPU_ABI_SIZE(" t ")"
                for (i = 1; i <= nmembers; i++) print "VGPU_ABI_OFF(" t ", " members[i] ")"
            }
            depth = 0; next
        }
        if (depth == 1 && opens == 0 && line ~ /;/) member(line)
        else if (depth + opens - closes == 1 && closes > 0) member(substr(line, index(line, "}") + 1))
        depth += opens - closes
    }
}
