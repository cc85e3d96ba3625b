grep '^{' "$1" | python3 -c "
import sys,json
for l in sys.stdin:
    d=json.loads(l); print(d['tag'], d['i'], 'p50', d['lag_p50_ms'], 'p99', d['lag_p99_ms'], 'wall', d['wall'], 'broker', d['broker_cpu_s'], d['by_thread'], 'writer', d['writer_cpu_s'], 'commits', d.get('commits'), 'us/commit', d.get('broker_us_per_commit'), 'serve', d.get('serve_us_per_commit'), 'load', round(d['load'],1))"
