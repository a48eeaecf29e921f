// The parity rule of the shared corpus (tests/vectors/records/cases.json, SPEC §14.4): on every
// case, verifyRecord and the JavaScript CLI give Python verify-proof's exit code and, check by
// check, its status; `timestamp` alone may be SKIP where Python checked a stamp.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { verifyRecord, parseAt, CHECKS } from '../../src/verify-js/verify.mjs';

const dir = fileURLToPath(new URL('../vectors/records/', import.meta.url));
const cli = fileURLToPath(new URL('../../src/verify-js/bin/verify-proof.mjs', import.meta.url));
const corpus = JSON.parse(readFileSync(`${dir}cases.json`, 'utf8'));

/** The options verify-proof's arguments name, read as the CLI reads them; null: exit 2. */
function library(args) {
  const options = {};
  const read = (p) => readFileSync(`${dir}${p}`);
  try {
    const record = read(args[0]);
    for (let i = 1; i < args.length; i += 2) {
      const [flag, value] = [args[i], args[i + 1]];
      if (flag === '--roots') options.roots = `${dir}${value}`;
      else if (flag === '--keys') options.keys = read(value);
      else if (flag === '--policy') options.policy = read(value);
      else if (flag === '--at') options.at = parseAt(value);
      else if (flag === '--tsa-ca') { read(value); options.tsaCa = true; }
      else throw new Error(`the corpus uses ${flag}`);
    }
    return { record: new Uint8Array(record), options };
  } catch (e) {
    if (e.code === 'ENOENT') return null;
    throw e;
  }
}

function expectSame(name, python, exit, checks) {
  assert.equal(exit, python.exit, `${name}: exit`);
  if (python.exit === 2) return;
  assert.deepEqual(checks.map((c) => c.name), [...CHECKS], name);
  python.checks.forEach((want, i) => {
    const got = checks[i].status;
    if (want.name === 'timestamp' && got === 'SKIP') return;
    assert.equal(got, want.result, `${name}: ${want.name}: JS says "${checks[i].detail}", Python "${want.detail}"`);
  });
}

test(`corpus: ${corpus.cases.length} cases, verifyRecord gives Python's verdicts`, async () => {
  assert.ok(corpus.cases.length >= 40);
  for (const c of corpus.cases) {
    const input = library(c.args);
    if (input === null) { assert.equal(c.python.exit, 2, `${c.name}: a file is missing`); continue; }
    const result = await verifyRecord(input.record, input.options);
    assert.ok(!String(result.error).startsWith('internal error'), `${c.name}: ${result.error}`);
    const exit = result.error !== undefined ? 2 : result.ok ? 0 : 1;
    expectSame(c.name, c.python, exit, result.checks);
  }
});

const run = (args) => new Promise((resolve) => {
  execFile(process.execPath, [cli, ...args, '--json'], { cwd: dir }, (error, stdout) => {
    resolve({ exit: error ? error.code : 0, stdout });
  });
});

test('corpus: the CLI gives Python\'s exit codes and verdicts', async () => {
  const pending = [...corpus.cases];
  const worker = async () => {
    for (let c = pending.shift(); c; c = pending.shift()) {
      const { exit, stdout } = await run(c.args);
      const checks = exit === 2 ? [] : JSON.parse(stdout).checks.map((x) => ({ name: x.name, status: x.result, detail: x.detail }));
      expectSame(c.name, c.python, exit, checks);
    }
  };
  await Promise.all([worker(), worker()]);
});
