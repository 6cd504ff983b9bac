# end-sales.sh — sourced by scripts/loadtest.sh, scripts/capacity.sh and scripts/scaling.sh:
# the end of the sales of the vouchers a run created. Left on sale (1–2 h, up to millions of
# orders), each is loaded with its users into Redis by every asynchronous instance that starts
# on the database before its sale would have ended (the run's own next async cluster, the next
# run, make loadtest-ci's async run, any instance on LOADTEST_DSN). A script calls it once the
# cluster that sold them is down, and from its EXIT trap, which bash runs on SIGINT and SIGTERM
# as well. The service has no means to end a sale; `harness end-sales` is one UPDATE of
# seckill_vouchers.end_time.
#
#   end_sales_of NAME ARGS...   bin/harness end-sales -dsn $LOADTEST_DSN ARGS... (voucher ids,
#                               or -k6-log FILE), its output appended to $OUT/end-sales.txt;
#                               returns 1, saying so as NAME, when it fails

end_sales_of() {
	local name=$1
	shift
	bin/harness end-sales -dsn "$LOADTEST_DSN" "$@" >>"$OUT/end-sales.txt" 2>&1 || {
		echo "$name: could not end the sales of the run's vouchers ($OUT/end-sales.txt)" >&2
		return 1
	}
}
