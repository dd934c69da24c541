# Lays out the service: the launcher, the document root with its health file, and the CGI
# program from /src.
set -eu
mkdir -p /out/srv/www/cgi-bin /out/bin
cp /src/greet /out/srv/www/cgi-bin/greet
cp /common/greeter /out/bin/greeter
echo ok > /out/srv/www/healthz
chmod 755 /out/srv/www/cgi-bin/greet /out/bin/greeter
