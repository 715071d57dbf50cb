#!/usr/bin/env bash
# The soak (bench/soak.sh, issue 22 item 6) for CANOPY_SOAK_MINUTES (2) minutes: a system
# session and five attach sessions, ten querying clients, `canopy top`, process churn, a
# compile loop, a state dir near its quota, a SIGTERM and a SIGKILL restart; checks and
# their bounds are listed in bench/soak.sh.
exec bash "$(dirname "$0")/../../bench/soak.sh" --minutes "${CANOPY_SOAK_MINUTES:-2}"
