# Lays out the service under /out/srv: start, www/cgi-bin/scores, www/healthz, bin/busybox
# (for httpd) and bin/int-sort (the admitted capability, mounted at /cap).
set -eu
mkdir -p /out/srv/bin /out/srv/www/cgi-bin
cp /bin/busybox /out/srv/bin/busybox
cp /cap/bin/int-sort /out/srv/bin/int-sort
cp /src/start /out/srv/start
cp /src/scores /out/srv/www/cgi-bin/scores
echo ok > /out/srv/www/healthz
chmod 755 /out/srv/start /out/srv/www/cgi-bin/scores /out/srv/bin/busybox /out/srv/bin/int-sort
