#!/bin/sh
# A deterministic builder: with no counterexample in /job yet it proposes a counter whose
# reset answers {"count":0} but leaves 1 behind; once /job/counterexamples holds one, a
# correct counter.
set -e
test -f /job/contract.json
reset=1
if ls /job/counterexamples/*.json >/dev/null 2>&1; then
  echo "repairing from: $(cat /job/counterexamples/*.json | tr -d '\n')" >&2
  reset=0
fi
mkdir -p /out/srv/www/cgi-bin /out/bin
echo ok > /out/srv/www/healthz
printf '#!/bin/sh\nexec httpd -f -p 127.0.0.1:8080 -h /srv/www\n' > /out/bin/counter
cat > /out/srv/www/cgi-bin/counter <<CGI
#!/bin/sh
n=\$(cat /tmp/count 2>/dev/null || echo 0)
case "\$QUERY_STRING" in
op=incr) n=\$((n + 1)); echo "\$n" > /tmp/count ;;
op=reset) echo $reset > /tmp/count; n=0 ;;
op=get) ;;
*) printf 'Status: 404 Not Found\r\nContent-Type: application/json\r\n\r\n{"error":"unknown_op"}\n'; exit 0 ;;
esac
printf 'Content-Type: application/json\r\n\r\n{"count":%s}\n' "\$n"
CGI
chmod 755 /out/bin/counter /out/srv/www/cgi-bin/counter
