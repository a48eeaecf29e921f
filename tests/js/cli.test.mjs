// The CLI: verify-proof's lines and exit codes on odd command lines (usage 2, I/O 2, a FAIL 1),
// compared with the Python command when the venv is there.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const cli = join(repo, 'src/verify-js/bin/verify-proof.mjs');
const python = join(repo, '.venv/bin/python');
const REC = 'roots/records/2026-11-04-tickets.json';
const CALENDAR = 'roots/records/2026-11-01-calendar.json';

const js = (args, input) => spawnSync(process.execPath, [cli, ...args], { cwd: repo, input, encoding: 'utf8' });

const LINES = [
  [REC, '--roots', 'roots', '--policy', 'roots/policy.txt', '--at', '2026-11-04T13:00:00Z'],
  [REC, '--roots', 'roots', '--at', '2026-11-04 15:00:00+02:00'],
  [REC, '--roots', 'roots', '--at', '1793970301'],
  [CALENDAR, '--roots', 'roots', '--tsa-ca', 'roots/tsa-ca.pem', '--at', '1793797200'],
  [CALENDAR, '--roots', 'roots/', '--keys', 'roots/keys.json', '--at', '1793797200', '--json'],
  [CALENDAR, '--keys', 'roots/keys.json', '--head', 'roots/2026-11-01.json', '--history-proof', 'roots/2026-11-01.tlog-proof', '--at', '1793797200'],
  [CALENDAR, '--keys', 'roots/keys.json', '--head', 'roots/2026-11-01.jws', '--at', '1793797200'],
  [CALENDAR, '--roots', 'roots', '--head', 'roots/2026-11-03.json', '--at', '1793797200'],
  [CALENDAR, '--roots', 'roots', '--iss', 'https://other.example', '--at', '1793797200'],
  [CALENDAR, '--roots', 'roots', '--origin', 'other.example/history', '--at', '1793797200'],
  [CALENDAR, '--roots', 'roots', '--policy', 'roots/policy.txt', '--at', '1793700000'],
  [REC],
  [REC, '--roots', 'nowhere'],
  ['missing.json', '--roots', 'roots'],
  [REC, '--roots', 'roots', '--at', 'yesterday'],
  [REC, '--roots', 'roots', '--at', '2026-02-30T00:00:00Z'],
  [REC, '--roots', 'roots', '--policy', 'roots/README.md'],
  [REC, '--roots', 'roots', '--policy', 'missing.txt'],
  [REC, '--roots', 'roots', '--keys', 'roots/policy.txt'],
  [REC, '--roots', 'roots', '--tsa-ca', 'missing.pem'],
  [REC, '--roots', 'roots', '--origin', 'bad name'],
  [REC, '--roots'],
  [REC, '--roots', 'roots', '--bogus'],
  [],
  ['roots/README.md', '--roots', 'roots'],
  ['roots/2026-11-01.jws', '--roots', 'roots'],
];

test('the CLI prints verify-proof\'s lines and exits as it does', { skip: !existsSync(python) && 'no .venv' }, () => {
  const script = `
import contextlib, io, json, sys
from capability_anchor.cli.verify_proof import main
out = []
for args in json.load(sys.stdin):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main(args)
        except SystemExit as exc:
            code = exc.code
    out.append({"exit": code, "stdout": buf.getvalue()})
print(json.dumps(out))`;
  const answers = JSON.parse(execFileSync(python, ['-c', script], { cwd: repo, input: JSON.stringify(LINES), env: { ...process.env, PYTHONPATH: join(repo, 'src') } }));
  LINES.forEach((args, i) => {
    const got = js(args);
    assert.equal(got.status, answers[i].exit, `${args.join(' ')}: ${got.stderr}`);
    const strip = (text) => text.split('\n').filter((l) => !l.startsWith('SKIP timestamp') && !l.includes('"timestamp"')).join('\n');
    if (!args.includes('--tsa-ca')) assert.equal(strip(got.stdout), strip(answers[i].stdout), args.join(' '));
    if (got.status === 2) assert.match(got.stderr, /verify-proof: /);
  });
});

test('exit codes without Python: 0, 1, 2, and RECORD from stdin', () => {
  assert.equal(js([REC, '--roots', 'roots', '--at', '1793797200']).status, 0);
  assert.equal(js([REC, '--roots', 'roots']).status, 1); // the record has expired by now
  assert.equal(js([REC]).status, 2);
  assert.equal(js([]).status, 2);
  const stdin = js(['-', '--roots', 'roots', '--at', '1793797200'], execFileSync('cat', [join(repo, REC)]));
  assert.equal(stdin.status, 0, stdin.stderr);
  assert.equal(stdin.stdout.split('\n').filter(Boolean).length, 9);
});

test('the CLI reads URLs: RECORD, --keys, --policy and --roots', async (t) => {
  const { createServer } = await import('node:http');
  const { readFileSync } = await import('node:fs');
  const server = createServer((req, res) => {
    const path = join(repo, decodeURIComponent(req.url));
    if (!existsSync(path) || req.url.endsWith('/')) { res.writeHead(404); res.end(); return; }
    res.end(readFileSync(path));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  const base = `http://127.0.0.1:${server.address().port}`;
  const run = (args) => new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], { cwd: repo });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.on('close', (code) => resolve({ code, out }));
  });
  const { spawn } = await import('node:child_process');
  const ok = await run([`${base}/${REC}`, '--roots', `${base}/roots`, '--keys', `${base}/roots/keys.json`, '--policy', `${base}/roots/policy.txt`, '--at', '1793797200']);
  assert.equal(ok.code, 0, ok.out);
  assert.equal(ok.out.split('\n').filter((l) => l.startsWith('PASS')).length, 8);
  const gone = await run([`${base}/nothing.json`, '--roots', 'roots']);
  assert.equal(gone.code, 2);
});
