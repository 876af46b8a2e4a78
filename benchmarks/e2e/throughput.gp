# Throughput against link bandwidth (report.py passes datafile, out, title, nlinks, npolicies, ncols).
# Columns: link, its position (links from slowest to fastest, evenly spaced), one per policy, then
# the compute-only runs (drawn dashed: the ceilings).
set terminal pngcairo size 960,560 noenhanced
set output out
set datafile separator "\t"
set datafile missing "?"
set title title
set xlabel "link bandwidth per node and direction (unlimited: as one TCP stream measured it)"
set xrange [-0.5:nlinks - 0.5]
set ylabel "images / s, all ranks"
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0  # room above the highest line
set grid
set key outside right
if (ncols > 2 + npolicies) {
  plot for [i=3:2+npolicies] datafile using 2:i:xtic(1) with linespoints lw 2 pt 7 title columnheader(i), \
       for [i=3+npolicies:ncols] datafile using 2:i with lines dt 2 lw 2 title columnheader(i)
} else {  # no compute-only runs (sweep.sh --accuracy)
  plot for [i=3:2+npolicies] datafile using 2:i:xtic(1) with linespoints lw 2 pt 7 title columnheader(i)
}
