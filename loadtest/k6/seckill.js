// k6 load test of the seckill service through nginx (scripts/cluster.sh or docker-compose.yml).
//
// Two scenarios (three with MODE=async), one after the other, each on its own freshly created
// voucher:
//   storm   — duplicate storm: STORM_RATE new users a second, each firing STORM_BURST orders for
//             the same voucher at once (one http.batch, one connection per request), so nginx's
//             round-robin hands the same user to every instance. Stock covers every user, so the
//             only thing standing between a user and a second order is the lock (and, last, the
//             database's unique key).
//   sellout — SELLOUT_RATE distinct users a second, one order each, five times more users than
//             stock: the stock must reach exactly zero and never below. The default rate is above
//             what the service completes on a 2-core machine, so while stock lasts it measures
//             the service's orders per second under a burst (docs/loadtest.md).
//   flash   — MODE=async only: a flash peak, FLASH_USERS distinct users all at once (FLASH_VUS
//             virtual users, each sending FLASH_BATCH users' orders in one http.batch until all
//             have ordered), five times more users than stock.
//
// MODE=async (the service runs SECKILL_ORDER_MODE=async): an order is accepted with 202
// {"orderId", "status": "pending"} instead of 201, and written later by the stream writers;
// the verifier waits for them before it reads the database. The counters and the order log
// call an accepted order "created" in both modes.
//
// The verdict is not given here but by the database: `bin/harness verify` reads the summary
// this script writes (the vouchers and their initial stock, as created by setup()) and the
// orders it logged, and checks them against MySQL. See docs/loadtest.md.
//
// Environment (all optional):
//   BASE_URL        http://127.0.0.1:8080 (loopback only: the script refuses anything else)
//   ADMIN_TOKEN     loadtest-admin-token
//   DURATION        seconds of load per scenario (30)
//   STORM_RATE      new users per second in the storm (40)
//   STORM_BURST     concurrent orders per storm user (8)
//   SELLOUT_RATE    users (= requests) per second in the sell-out (300)
//   SELLOUT_STOCK   stock of the sell-out voucher (SELLOUT_RATE*DURATION/5)
//   USER_BASE       first user id (1000000000; storm users count up from it, sell-out users
//                   from USER_BASE+50000000)
//   STORM_P99_MS    p99 latency threshold of the storm, milliseconds (2000; see docs/loadtest.md)
//   SELLOUT_P99_MS  p99 latency threshold of the sell-out, milliseconds (5000; see docs/loadtest.md)
//   EXPECT_FAILURE  1 when a broken guard is under test: no latency thresholds (0)
//   MODE            sync or async: the service's SECKILL_ORDER_MODE (sync)
//   FLASH_USERS     users of the flash peak (5000; async only)
//   FLASH_BATCH     orders per http.batch in the flash peak (25)
//   FLASH_VUS       virtual users of the flash peak (50: FLASH_VUS × FLASH_BATCH requests in flight)
//   FLASH_STOCK     stock of the flash voucher (FLASH_USERS/5)
//   RETRIES         times a request answered 5xx or not at all is sent again (0). With
//                   RETRIES > 0 (make loadtest KILL=1 kills an instance mid-sale), a user whose
//                   accepted answer was lost and whose retry is answered already_ordered is
//                   logged with the orderId that 409 carries, and http_req_failed has no
//                   threshold (the lost answers are the fault); every user's final answer
//                   must still be 201/202 or 409 (checks).
//   LOCK            the guard under test, only recorded in the summary (redis)
//   SUMMARY         where handleSummary writes its JSON (run/loadtest/summary.json)
// Orders answered 201 (202) are logged one JSON line each with console.log: run k6 with
// --log-format=json --console-output=<file> and hand that file to the verifier (handleSummary
// only sees aggregated metrics, never individual responses, so the ids cannot travel in it).
// Each voucher setup() creates is logged too, {"voucher": {"scenario", "id"}}, as it is
// created: `bin/harness end-sales -k6-log <file>` ends their sales after the run.

import http from 'k6/http';
import exec from 'k6/execution';
import { check, sleep } from 'k6';
import { Counter, Trend } from 'k6/metrics';

const env = (name, def) => (__ENV[name] !== undefined && __ENV[name] !== '' ? __ENV[name] : def);
const num = (name, def) => {
  const v = Number(env(name, def));
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number, got ${__ENV[name]}`);
  return v;
};

const BASE_URL = env('BASE_URL', 'http://127.0.0.1:8080');
if (!/^http:\/\/(127\.0\.0\.1|localhost)(:\d+)?$/.test(BASE_URL)) {
  throw new Error(`BASE_URL must be a loopback address, got ${BASE_URL}`);
}
const ADMIN_TOKEN = env('ADMIN_TOKEN', 'loadtest-admin-token');
const DURATION = num('DURATION', 30);
const STORM_RATE = num('STORM_RATE', 40);
const STORM_BURST = num('STORM_BURST', 8);
const SELLOUT_RATE = num('SELLOUT_RATE', 300);
const SELLOUT_STOCK = num('SELLOUT_STOCK', Math.max(1, Math.floor((SELLOUT_RATE * DURATION) / 5)));
const USER_BASE = num('USER_BASE', 1000000000);
const SELLOUT_USER_OFFSET = 50000000;
const STORM_P99_MS = num('STORM_P99_MS', 2000);
const SELLOUT_P99_MS = num('SELLOUT_P99_MS', 5000);
// With a broken guard on purpose (LOCK=local|none) every duplicate reaches the database, which is
// slower by design: the latency bounds then do not apply; the correctness thresholds still do.
const EXPECT_FAILURE = env('EXPECT_FAILURE', '0') === '1';
const LOCK = env('LOCK', 'redis');
const SUMMARY = env('SUMMARY', 'run/loadtest/summary.json');
const MODE = env('MODE', 'sync');
if (MODE !== 'sync' && MODE !== 'async') throw new Error(`MODE must be sync or async, got ${MODE}`);
const ASYNC = MODE === 'async';
const ACCEPTED = ASYNC ? 202 : 201; // the status of an accepted order
const FLASH_USERS = num('FLASH_USERS', 5000);
const FLASH_BATCH = num('FLASH_BATCH', 25);
const FLASH_VUS = num('FLASH_VUS', 50);
const FLASH_STOCK = num('FLASH_STOCK', Math.max(1, Math.floor(FLASH_USERS / 5)));
const FLASH_USER_OFFSET = 90000000;
const RETRIES = Number(env('RETRIES', '0'));
if (!Number.isInteger(RETRIES) || RETRIES < 0) throw new Error(`RETRIES must be a whole number, got ${__ENV.RETRIES}`);

const SCENARIOS = ASYNC ? ['storm', 'sellout', 'flash'] : ['storm', 'sellout'];
// Every answer the API may give an order request (issue 2), plus two buckets for the rest.
const RESULTS = ['created', 'already_ordered', 'order_in_progress', 'sold_out', 'sale_not_active',
  'not_found', 'invalid_argument', 'unavailable', 'other_4xx', 'server_error'];

// One counter per scenario and result: they all appear in the summary without extra thresholds.
const counters = {};
for (const s of SCENARIOS) {
  counters[s] = {};
  for (const r of RESULTS) counters[s][r] = new Counter(`${s}_${r}`);
}
// Wall-clock time of every 201: min and max bound the window in which orders were created,
// which gives orders per second independent of how long the scenario kept sending.
const createdAt = {};
for (const s of SCENARIOS) createdAt[s] = new Trend(`${s}_created_at_ms`);
// Per-scenario latency of the order requests (http_req_duration, kept per scenario so that
// the figures exist whether or not a threshold is declared on them).
const latency = {};
for (const s of SCENARIOS) latency[s] = new Trend(`${s}_order_duration`, true);
const serverErrors = new Counter('server_errors');
// Requests sent again after a 5xx or no answer (RETRIES > 0), and users whose accepted answer
// was lost and who learnt their order from the 409 already_ordered of a retry.
const retried = new Counter('retried');
const recovered = new Counter('recovered_by_409');
// The flash peak's span: from its first request sent to its last answer.
const flashSentAt = new Trend('flash_sent_at_ms');
const flashAnsweredAt = new Trend('flash_answered_at_ms');

// 201 (202) and 409 are the answers of a healthy service under this load; anything else is a failure.
http.setResponseCallback(http.expectedStatuses(ACCEPTED, 409));

export const options = {
  scenarios: {
    storm: {
      executor: 'constant-arrival-rate',
      exec: 'storm',
      rate: STORM_RATE,
      timeUnit: '1s',
      duration: `${DURATION}s`,
      preAllocatedVUs: Math.ceil(STORM_RATE),
      maxVUs: Math.ceil(STORM_RATE * 10),
      gracefulStop: '10s',
    },
    sellout: {
      executor: 'constant-arrival-rate',
      exec: 'sellout',
      startTime: `${DURATION + 3}s`,
      rate: SELLOUT_RATE,
      timeUnit: '1s',
      duration: `${DURATION}s`,
      preAllocatedVUs: Math.ceil(SELLOUT_RATE),
      maxVUs: Math.ceil(SELLOUT_RATE * 5),
      gracefulStop: '10s',
    },
    ...(ASYNC
      ? {
          flash: {
            executor: 'shared-iterations',
            exec: 'flash',
            startTime: `${2 * DURATION + 6}s`,
            vus: Math.min(FLASH_VUS, Math.ceil(FLASH_USERS / FLASH_BATCH)),
            iterations: Math.ceil(FLASH_USERS / FLASH_BATCH),
            maxDuration: '60s',
          },
        }
      : {}),
  },
  // http.batch sends all of a storm user's (a flash batch's) orders at once, each on its own connection.
  batch: ASYNC ? Math.max(STORM_BURST, FLASH_BATCH) : STORM_BURST,
  batchPerHost: ASYNC ? Math.max(STORM_BURST, FLASH_BATCH) : STORM_BURST,
  summaryTrendStats: ['avg', 'min', 'med', 'p(90)', 'p(95)', 'p(99)', 'max'],
  thresholds: Object.assign(
    {
      server_errors: ['count==0'],
      checks: ['rate==1'],
    },
    RETRIES > 0 ? {} : { http_req_failed: ['rate==0'] },
    EXPECT_FAILURE
      ? {}
      : {
          storm_order_duration: [`p(99)<${STORM_P99_MS}`],
          sellout_order_duration: [`p(99)<${SELLOUT_P99_MS}`],
        },
  ),
};

// createVoucher creates the voucher of a scenario. sellsOut: the scenario sends more buyers
// than stock, and the verifier requires that it sold out (buyers answered sold_out).
function createVoucher(scenario, stamp, stock, sellsOut) {
  const title = `loadtest ${scenario} ${stamp}`;
  const now = Date.now();
  const body = JSON.stringify({
    title,
    stock,
    beginTime: new Date(now - 60 * 1000).toISOString(),
    endTime: new Date(now + 2 * 3600 * 1000).toISOString(),
  });
  const res = http.post(`${BASE_URL}/api/vouchers`, body, {
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${ADMIN_TOKEN}` },
    responseCallback: http.expectedStatuses(201),
  });
  if (res.status !== 201) throw new Error(`create voucher ${title}: ${res.status} ${res.body}`);
  const id = res.json('id');
  if (!Number.isSafeInteger(id) || id <= 0) throw new Error(`create voucher ${title}: bad id in ${res.body}`);
  // Recorded at once in the console output, not only in the summary (written at the end, and
  // not at all by a k6 killed): scripts/loadtest.sh ends the run's sales from it.
  console.log(JSON.stringify({ voucher: { scenario, id } }));
  return { scenario, id, stock, sellsOut };
}

export function setup() {
  const stamp = new Date().toISOString();
  // One more second of users than the scenario lasts: constant-arrival-rate may start one
  // iteration more than rate × duration, and the storm must never run out of stock.
  const stormStock = Math.ceil(STORM_RATE * (DURATION + 1));
  const vouchers = [createVoucher('storm', stamp, stormStock, false), createVoucher('sellout', stamp, SELLOUT_STOCK, true)];
  if (ASYNC) vouchers.push(createVoucher('flash', stamp, FLASH_STOCK, true));
  return { startedAt: stamp, userBase: USER_BASE, vouchers };
}

function orderRequest(voucherId, userId) {
  return {
    method: 'POST',
    url: `${BASE_URL}/api/vouchers/${voucherId}/orders`,
    body: null,
    params: { headers: { 'X-User-ID': String(userId) }, tags: { name: 'POST /api/vouchers/{id}/orders' } },
  };
}

function classify(res) {
  if (res.status === ACCEPTED) return 'created';
  if (res.status >= 500 || res.status === 0) return 'server_error';
  let code = '';
  try {
    code = res.json('error.code');
  } catch (_) {
    return 'other_4xx';
  }
  return RESULTS.includes(code) && code !== 'created' ? code : 'other_4xx';
}

const lost = (res) => res.status === 0 || res.status >= 500;

// send sends one order request, and again (up to RETRIES times, 200 ms apart) while it is
// answered 5xx or not at all. It reports the last answer and whether any attempt was lost.
function send(r) {
  let res = http.request(r.method, r.url, r.body, r.params);
  let lostOnce = lost(res);
  for (let i = 0; i < RETRIES && lost(res); i++) {
    retried.add(1);
    sleep(0.2);
    res = http.request(r.method, r.url, r.body, r.params);
  }
  return { res, lostOnce };
}

const decimalId = (id) => typeof id === 'string' && /^[1-9][0-9]*$/.test(id);

function field(res, path) {
  try {
    return res.json(path);
  } catch (_) {
    return undefined;
  }
}

// record counts and checks one answer, and returns the order id it accepted ('' if none).
function record(scenario, res) {
  const result = classify(res);
  counters[scenario][result].add(1);
  latency[scenario].add(res.timings.duration);
  if (res.status >= 500) serverErrors.add(1);
  const orderId = res.status === ACCEPTED ? field(res, 'orderId') : '';
  check(res, {
    [`status is ${ACCEPTED} or 409`]: (r) => r.status === ACCEPTED || r.status === 409,
    [`${ACCEPTED} carries a decimal orderId string`]: (r) => r.status !== ACCEPTED || decimalId(orderId),
    '409 carries a known error code': (r) => r.status !== 409 || ['already_ordered', 'order_in_progress', 'sold_out'].includes(result),
  });
  if (ASYNC) check(res, { '202 says pending': (r) => r.status !== 202 || field(r, 'status') === 'pending' });
  if (res.status === ACCEPTED) createdAt[scenario].add(Date.now());
  return res.status === ACCEPTED ? String(orderId) : '';
}

// settle records a user's answers for one voucher and logs each accepted order, one line read
// back by the verifier (see the header). A user whose accepted answer was lost to a 5xx
// or a broken connection and who was answered already_ordered on retry learns the order from
// that 409's orderId; only then is a 409 taken for an order, so a clean run cannot hide a
// wrong already_ordered behind it.
function settle(scenario, voucherId, userId, outcomes) {
  const logOrder = (id) => console.log(JSON.stringify({ order: { id, user: userId, voucher: voucherId, scenario } }));
  let accepted = 0;
  let fromConflict = '';
  let anyLost = false;
  for (const { res, lostOnce } of outcomes) {
    const id = record(scenario, res);
    // Every accepted answer is logged: a broken guard shows as one user accepted twice.
    if (id) {
      logOrder(id);
      accepted++;
    }
    anyLost = anyLost || lostOnce;
    if (res.status === 409 && field(res, 'error.code') === 'already_ordered' && decimalId(field(res, 'error.orderId'))) {
      fromConflict = fromConflict || field(res, 'error.orderId');
    }
  }
  if (accepted === 0 && anyLost && fromConflict) {
    logOrder(fromConflict);
    recovered.add(1);
  }
}

function voucherOf(data, scenario) {
  return data.vouchers.find((v) => v.scenario === scenario).id;
}

// batch sends reqs at once and then, one by one, again those answered 5xx or not at all.
function batch(reqs) {
  return http.batch(reqs).map((res, i) => {
    if (!lost(res) || RETRIES === 0) return { res, lostOnce: false };
    const again = send(reqs[i]);
    return { res: again.res, lostOnce: true };
  });
}

export function storm(data) {
  const voucherId = voucherOf(data, 'storm');
  const userId = data.userBase + exec.scenario.iterationInTest;
  const reqs = [];
  for (let i = 0; i < STORM_BURST; i++) reqs.push(orderRequest(voucherId, userId));
  settle('storm', voucherId, userId, batch(reqs));
}

export function sellout(data) {
  const voucherId = voucherOf(data, 'sellout');
  const userId = data.userBase + SELLOUT_USER_OFFSET + exec.scenario.iterationInTest;
  settle('sellout', voucherId, userId, [send(orderRequest(voucherId, userId))]);
}

export function flash(data) {
  const voucherId = voucherOf(data, 'flash');
  const first = data.userBase + FLASH_USER_OFFSET + exec.scenario.iterationInTest * FLASH_BATCH;
  const users = [];
  for (let u = first; u < first + FLASH_BATCH && u < data.userBase + FLASH_USER_OFFSET + FLASH_USERS; u++) users.push(u);
  flashSentAt.add(Date.now());
  const outcomes = batch(users.map((u) => orderRequest(voucherId, u)));
  flashAnsweredAt.add(Date.now());
  users.forEach((u, i) => settle('flash', voucherId, u, [outcomes[i]]));
}

// ---- summary ----

const metric = (data, name) => (data.metrics[name] ? data.metrics[name].values : undefined);
const count = (data, name) => (metric(data, name) ? metric(data, name).count : 0);

function scenarioFigures(data, s) {
  const lengthSec = s === 'flash' ? undefined : DURATION;
  const results = {};
  let requests = 0;
  for (const r of RESULTS) {
    results[r] = count(data, `${s}_${r}`);
    requests += results[r];
  }
  const lat = metric(data, `${s}_order_duration`) || {};
  const ts = metric(data, `${s}_created_at_ms`);
  const windowS = ts && ts.max > ts.min ? (ts.max - ts.min) / 1000 : 0;
  return {
    requests,
    requestsPerSec: lengthSec ? requests / lengthSec : 0,
    orders: results.created,
    ordersPerSec: windowS > 0 ? results.created / windowS : 0,
    orderWindowSec: windowS,
    latencyMs: { p50: lat.med, p95: lat['p(95)'], p99: lat['p(99)'], max: lat.max },
    results,
  };
}

function fmt(n, digits = 1) {
  return n === undefined || n === null ? '-' : Number(n).toFixed(digits);
}

function textReport(summary) {
  const lines = [];
  lines.push(
    `k6 figures (MODE=${summary.mode}, LOCK=${summary.lock}, ${summary.durationSec}s per scenario` +
      (ASYNC ? `; flash: ${FLASH_USERS} users at once, req/s not given` : '') +
      `; "orders" are the ${ACCEPTED} answers)`,
  );
  lines.push('scenario  requests  req/s   orders  orders/s  p50ms   p95ms   p99ms   maxms');
  for (const s of SCENARIOS) {
    const f = summary.scenarios[s];
    lines.push(
      `${s.padEnd(8)}  ${String(f.requests).padStart(8)}  ${fmt(f.requestsPerSec).padStart(6)}  ${String(f.orders).padStart(6)}  ${fmt(f.ordersPerSec).padStart(8)}  ` +
        `${fmt(f.latencyMs.p50).padStart(6)}  ${fmt(f.latencyMs.p95).padStart(6)}  ${fmt(f.latencyMs.p99).padStart(6)}  ${fmt(f.latencyMs.max).padStart(6)}`,
    );
  }
  lines.push('results per scenario:');
  for (const s of SCENARIOS) {
    const nonzero = Object.entries(summary.scenarios[s].results).filter(([, n]) => n > 0);
    lines.push(`  ${s.padEnd(8)} ${nonzero.map(([r, n]) => `${r}=${n}`).join('  ') || '(none)'}`);
  }
  if (ASYNC) lines.push(`flash peak: ${FLASH_USERS} users answered within ${fmt(summary.flashSpanSec, 2)} s of its first request`);
  lines.push(`dropped iterations: ${summary.droppedIterations}`);
  if (RETRIES > 0) lines.push(`requests retried after a 5xx or no answer: ${summary.retried}; orders learnt from a retry's 409: ${summary.recoveredBy409}`);
  lines.push('thresholds:');
  for (const [name, ok] of Object.entries(summary.thresholds)) lines.push(`  ${ok ? 'ok  ' : 'FAIL'} ${name}`);
  return lines.join('\n') + '\n';
}

export function handleSummary(data) {
  const thresholds = {};
  for (const [name, m] of Object.entries(data.metrics)) {
    for (const [expr, t] of Object.entries(m.thresholds || {})) thresholds[`${name}: ${expr}`] = t.ok;
  }
  const scenarios = {};
  for (const s of SCENARIOS) scenarios[s] = scenarioFigures(data, s);
  const summary = {
    lock: LOCK,
    mode: MODE,
    baseUrl: BASE_URL,
    startedAt: data.setup_data ? data.setup_data.startedAt : null,
    durationSec: DURATION,
    params: Object.assign(
      { STORM_RATE, STORM_BURST, SELLOUT_RATE, SELLOUT_STOCK, USER_BASE, STORM_P99_MS, SELLOUT_P99_MS, RETRIES },
      ASYNC ? { FLASH_USERS, FLASH_BATCH, FLASH_VUS, FLASH_STOCK } : {},
    ),
    // What setup() created: the verifier's trustworthy source for the initial stock.
    vouchers: data.setup_data ? data.setup_data.vouchers : [],
    scenarios,
    droppedIterations: count(data, 'dropped_iterations'),
    retried: count(data, 'retried'),
    flashSpanSec: ASYNC && metric(data, 'flash_sent_at_ms') && metric(data, 'flash_answered_at_ms')
      ? (metric(data, 'flash_answered_at_ms').max - metric(data, 'flash_sent_at_ms').min) / 1000
      : undefined,
    recoveredBy409: count(data, 'recovered_by_409'),
    thresholds,
    metrics: data.metrics,
  };
  return {
    stdout: textReport(summary),
    [SUMMARY]: JSON.stringify(summary, null, 2),
  };
}
