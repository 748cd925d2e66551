# Builds an upgrade script from its manifest (the Makefile runs it with -v base=<full script of
# the version upgraded from>):
#   \i FILE                   FILE, included whole;
#   \i-functions-of MANIFEST  every function file MANIFEST includes, in its order: every
#                             \i file outside sql/guards/, sql/tables/ and sql/security/
#                             (those hold guards, tables and policies/grants, which the
#                             upgrade manifest includes or writes out itself);
#   \i-under MANIFEST DIR     every \i file MANIFEST includes from folder DIR, in its order
#                             (the policies: \i-under sql/pgsql_broker.sql sql/security/policies/);
#   \new-signature NAME       function broker.NAME is created plain (the manifest dropped the
#                             base version's signature before, so nothing of that name exists).
# In included files, "CREATE FUNCTION broker.f" and "CREATE TRIGGER t" at the start of a line
# become CREATE OR REPLACE when the base script created f or t; new ones stay plain CREATE, so
# nothing planted beforehand is taken over (the executor DDL inside a string in executors.sql is
# never at the start of a line). A "CREATE TYPE broker.t" statement of a type the base script
# created is left out, up to its closing ");": a type cannot be replaced, so the manifest
# writes out what changed in it (ALTER TYPE), as it does for tables.
function include(f,    line, n) {
    print "-- source: " f
    while ((getline line < f) > 0) {
        if (match(line, /^CREATE TYPE broker\.[a-z_0-9]+/) && (substr(line, 8, RLENGTH - 7) in old)) {
            print "-- " substr(line, 13, RLENGTH - 12) ": created by the base version (changes: ALTER TYPE in the manifest)"
            while (line !~ /\);[ \t]*$/ && (getline line < f) > 0) ;
            continue
        }
        if (match(line, /^CREATE (FUNCTION broker\.|TRIGGER )[a-z_0-9]+/)) {
            n = substr(line, 8, RLENGTH - 7)
            if (n in old) sub(/^CREATE /, "CREATE OR REPLACE ", line)
        }
        print line
    }
    close(f)
}
BEGIN {
    while ((getline l < base) > 0)
        if (match(l, /^CREATE (OR REPLACE )?(FUNCTION broker\.|TRIGGER |TYPE broker\.)[a-z_0-9]+/)) {
            n = substr(l, RSTART, RLENGTH)
            sub(/^CREATE (OR REPLACE )?/, "", n)
            old[n] = 1
        }
    close(base)
}
/^\\i-functions-of / {
    m = $2
    while ((getline l < m) > 0)
        if (l ~ /^\\i sql\// && l !~ /^\\i sql\/(guards|tables|security)\//) { split(l, w, " "); include(w[2]) }
    close(m)
    next
}
/^\\i-under / {
    m = $2
    while ((getline l < m) > 0)
        if (l ~ /^\\i / && index(substr(l, 4), $3) == 1) { split(l, w, " "); include(w[2]) }
    close(m)
    next
}
/^\\new-signature / { delete old["FUNCTION broker." $2]; print "-- broker." $2 ": a new signature, created plain"; next }
/^\\i / { include($2); next }
{ print }
