#!/bin/sh
export GS_POLL_STATS=1 GS_LONG=400 GS_ANY=1
exec /tmp/wt-exp/build/trainer/gradsync-train "$@"
