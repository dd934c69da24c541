# Lays out the service under /out/srv, its CGI program storing uploads under $1; with $2
# "careless", it stores a body before checking it.
set -eu
mkdir -p /out/srv/www/cgi-bin
sed -e "s|@STORE@|$1|" -e "s|@CARELESS@|$2|" /src/scores > /out/srv/www/cgi-bin/scores
printf '#!/bin/sh\nexec httpd -f -p 127.0.0.1:8080 -h /srv/www\n' > /out/srv/start
echo ok > /out/srv/www/healthz
chmod 755 /out/srv/start /out/srv/www/cgi-bin/scores
