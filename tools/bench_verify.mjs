// The Node half of tools/bench_verify.py: `verifyRecord` on one record, its inputs in memory,
// timed per record after a warm-up. Prints {samples_ms, statuses} as JSON on stdout.
//   node tools/bench_verify.mjs RECORD KEYS HEAD TLOG_PROOF POLICY AT RUNS WARMUP
import { readFileSync } from 'node:fs';
import { verifyRecord } from '../src/verify-js/verify.mjs';

const [record, keys, head, tlogProof, policy, at, runs, warmup] = process.argv.slice(2);
const text = readFileSync(record, 'utf8');
const options = {
  keys: readFileSync(keys, 'utf8'),
  head: readFileSync(head),
  tlogProof: readFileSync(tlogProof),
  policy: readFileSync(policy, 'utf8'),
  at: Number(at),
};
let last = await verifyRecord(text, options);
for (let i = 0; i < Number(warmup); i += 1) last = await verifyRecord(text, options);
const samples = [];
for (let i = 0; i < Number(runs); i += 1) {
  const start = process.hrtime.bigint();
  last = await verifyRecord(text, options);
  samples.push(Number(process.hrtime.bigint() - start) / 1e6);
}
process.stdout.write(`${JSON.stringify({ samples_ms: samples, statuses: last.checks.map((c) => c.status) })}\n`);
