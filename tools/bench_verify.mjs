// The Node half of tools/bench_verify.py: `verifyRecord` on one record, its inputs in memory,
// timed per record after a warm-up, the head and tlog-proof taken in turn from the pairs given
// (many pairs: evidence the module's signature memo has not seen). Prints {samples_ms, statuses}.
//   node tools/bench_verify.mjs RECORD KEYS POLICY AT RUNS WARMUP HEAD:TLOG_PROOF...
import { readFileSync } from 'node:fs';
import { verifyRecord } from '../src/verify-js/verify.mjs';

const [record, keys, policy, at, runs, warmup, ...pairs] = process.argv.slice(2);
const text = readFileSync(record, 'utf8');
const base = { keys: readFileSync(keys, 'utf8'), policy: readFileSync(policy, 'utf8'), at: Number(at) };
const evidence = pairs.map((pair) => {
  const [head, tlogProof] = pair.split(':');
  return { ...base, head: readFileSync(head), tlogProof: readFileSync(tlogProof) };
});
let n = 0;
const once = () => verifyRecord(text, evidence[n++ % evidence.length]);
let last = await once();
for (let i = 0; i < Number(warmup); i += 1) last = await once();
const samples = [];
for (let i = 0; i < Number(runs); i += 1) {
  const start = process.hrtime.bigint();
  last = await once();
  samples.push(Number(process.hrtime.bigint() - start) / 1e6);
}
process.stdout.write(`${JSON.stringify({ samples_ms: samples, statuses: last.checks.map((c) => c.status) })}\n`);
