# shellcheck shell=bash
# timing.sh — sourced by scripts/abtest.sh and scripts/scaling.sh: where an open loop's requests
# spent their time inside the instances, from the instances' own histograms scraped before and
# after the load (docs/loadtest.md, "Where the admission's own tail is").
#
#   scrape INSTANCES FILE           the histograms' buckets of every instance listed in INSTANCES
#   quantiles BEFORE AFTER LABEL MATCH   "LABEL p50<=Xms p99<=Yms" of the lines holding MATCH
#   timing BEFORE AFTER ROUTE       ROUTE's time in the handlers and, for orders, the script's calls

# scrape INSTANCES FILE: into FILE, the buckets of the request durations and admission calls
# (seckill_http_request_duration_seconds, seckill_async_admission_call_seconds) of every instance
# whose base URL is a line of INSTANCES (scripts/cluster.sh's run/cluster/instances).
scrape() {
	local u
	: >"$2"
	while read -r u; do
		curl -fsS "$u/metrics" | grep -E '^seckill_(http_request_duration|async_admission_call)_seconds_bucket' >>"$2" || true
	done <"$1"
}

# quantiles BEFORE AFTER LABEL MATCH: the upper bounds of the buckets holding the 50th and 99th
# percentile of the histogram lines holding MATCH between two scrapes, all instances together:
# "LABEL p50<=Xms p99<=Yms" (a bucket's bound, not a reading).
quantiles() {
	awk -v label="$3" -v match_="$4" '
		index($0, match_) {
			match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5)
			if (FILENAME == ARGV[1]) c[le] -= $NF; else c[le] += $NF
			les[le] = 1
		}
		END {
			n = 0; for (le in les) { v = (le == "+Inf") ? 1e99 : le + 0; k[++n] = v; name[v] = le }
			for (i = 2; i <= n; i++) for (j = i; j > 1 && k[j - 1] > k[j]; j--) { t = k[j]; k[j] = k[j - 1]; k[j - 1] = t }
			total = c[name[k[n]]]
			if (total <= 0) { print label ": none"; exit }
			for (i = 1; i <= n; i++) {
				if (p50 == "" && c[name[k[i]]] >= 0.5 * total) p50 = name[k[i]]
				if (p99 == "" && c[name[k[i]]] >= 0.99 * total) p99 = name[k[i]]
			}
			printf "%s p50<=%s p99<=%s\n", label, (p50 == "+Inf" ? p50 : p50 * 1000 "ms"), (p99 == "+Inf" ? p99 : p99 * 1000 "ms")
		}' "$1" "$2"
}

# timing BEFORE AFTER ROUTE: ROUTE's requests' time in the instances' handlers, and for the
# orders the admission script's calls' time (none in the synchronous mode).
timing() {
	local t c
	t=$(quantiles "$1" "$2" in-instance "route=\"$3\"")
	if [[ $3 == POST* ]]; then
		c=$(quantiles "$1" "$2" calls seckill_async_admission_call_seconds_bucket)
		[[ $c == *none ]] || t="$t; $c"
	fi
	echo "$t"
}
