# Lays out the service under /out/srv, its CGI program storing uploads under $1.
set -eu
mkdir -p /out/srv/www/cgi-bin
sed "s|@STORE@|$1|" /src/scores > /out/srv/www/cgi-bin/scores
printf '#!/bin/sh\nexec httpd -f -p 127.0.0.1:8080 -h /srv/www\n' > /out/srv/start
echo ok > /out/srv/www/healthz
chmod 755 /out/srv/start /out/srv/www/cgi-bin/scores
