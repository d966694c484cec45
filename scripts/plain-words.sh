#!/bin/sh
# N words of plain text from a 16-word vocabulary, 12 to a sentence and a
# line, the same every time (srand(1)): calibration and profiling text for
# the synthetic models, whose vocabulary is bytes.
#   sh scripts/plain-words.sh 4000 >calib.txt
set -eu
awk -v n="${1:?usage: plain-words.sh N}" '
    BEGIN { srand(1); split("the cat sat on a mat and looked at big red ball she was happy day", w);
            for (i = 0; i < n; i++) printf "%s%s", w[int(rand() * 16) + 1], (i % 12 == 11) ? ".\n" : " " }'
