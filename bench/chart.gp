# bench/chart.gp: the benchmark chart, from throughput.dat and latency.dat
# (written by bench/report.js) in the current directory, to benchmarks.png.

set terminal pngcairo size 1200,500 font "sans,11"
set output 'benchmarks.png'
set multiplot layout 1,2
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.8
set grid ytics
set yrange [0:*]
set key off

set title 'Drain throughput (calls/s, higher is better)'
set xtics rotate by -20 scale 0
plot 'throughput.dat' using 2:xtic(1) linecolor rgb '#2b6cb0', \
     '' using 0:2:(sprintf('%d', $2)) with labels offset 0,0.7 notitle

set title 'Pick-up latency (ms, lower is better)'
set key top left
set xtics norotate
plot 'latency.dat' using 2:xtic(1) title 'retries' linecolor rgb '#2b6cb0', \
     '' using 3 title 'graphile-worker' linecolor rgb '#dd6b20'
unset multiplot
