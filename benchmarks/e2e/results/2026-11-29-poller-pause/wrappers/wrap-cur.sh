#!/bin/sh
export GS_POLL_STATS=1 
exec /tmp/wt-exp/build/trainer/gradsync-train "$@"
