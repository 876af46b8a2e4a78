# One node's link over time (report.py passes datafile, out, title, ymax, marks: iteration ends).
set terminal pngcairo size 960,400 noenhanced
set output out
set datafile separator "\t"
set title title
set xlabel "seconds since the first measured iteration began"
set ylabel "Gbit/s (10 ms bins)"
set yrange [0:ymax]
set autoscale xfix
set grid
set key outside bottom center horizontal
do for [m in marks] { set arrow from m, graph 0 to m, graph 1 nohead dt 2 lc rgb "gray40" }
plot datafile using 1:2 with steps lw 1.5 title "node 0 sends", \
     datafile using 1:3 with steps lw 1.5 title "node 0 receives"
