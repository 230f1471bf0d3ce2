#!/bin/sh
# retries-web: the dashboard of the retries extension, on 127.0.0.1:8080
# unless told otherwise (retries-web --help), against the PostgreSQL that
# PGHOST, PGPORT and PGDATABASE name.  See
# /usr/share/doc/retries-web/README.md.
exec node /usr/share/retries-web/server.js "$@"
