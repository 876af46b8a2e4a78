# Throughput against link bandwidth (report.py passes datafile, out, title, npolicies, ncols).
# Columns: link, Gbit/s, one per policy, then the compute-only runs (drawn dashed: the ceilings).
set terminal pngcairo size 960,560 noenhanced
set output out
set datafile separator "\t"
set datafile missing "?"
set title title
set logscale x
set xlabel "link bandwidth per node and direction (Gbit/s; unlimited: as measured)"
set ylabel "images / s, all ranks"
set yrange [0:*]
set grid
set key outside right
plot for [i=3:2+npolicies] datafile using 2:i:xtic(1) with linespoints lw 2 pt 7 title columnheader(i), \
     for [i=3+npolicies:ncols] datafile using 2:i with lines dt 2 lw 2 title columnheader(i)
