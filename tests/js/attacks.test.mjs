// Hostile input: every check fails cleanly (FAIL, SKIP or an exit-2 error, never an exception) on
// garbage of many shapes, made by a seeded PRNG; the same garbage gives Python's verdicts when the
// venv is there; and fetched inputs have a size limit and a deadline (a local http server).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, mkdtempSync, writeFileSync, mkdirSync, existsSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import { verifyRecord, CHECKS, parseTlogProof, parsePolicy, parseNote, parseJSON } from '../../src/verify-js/verify.mjs';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const roots = join(repo, 'roots');
const AT = 1793797200;
const sample = JSON.parse(readFileSync(join(roots, 'records/2026-11-04-tickets.json'), 'utf8'));

function prng(seed) { // mulberry32
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function garbage(rand, depth = 0) {
  const pick = Math.floor(rand() * 16);
  switch (pick) {
    case 0: return null;
    case 1: return rand() < 0.5;
    case 2: return Math.floor(rand() * 2 ** 31) - 2 ** 30;
    case 3: return rand() * 1e6;
    case 4: return 2 ** 53 + Math.floor(rand() * 100);
    case 5: return -1;
    case 6: return '';
    case 7: return 'x'.repeat(Math.floor(rand() * 40000));
    case 8: return '\ud800' + String.fromCharCode(Math.floor(rand() * 0x10000));
    case 9: return 'a'.repeat(64);
    case 10: return '0'.repeat(63) + 'g';
    case 11: return depth > 3 ? [] : Array.from({ length: Math.floor(rand() * 4) }, () => garbage(rand, depth + 1));
    case 12: return depth > 3 ? {} : Object.fromEntries(Array.from({ length: Math.floor(rand() * 4) }, (_, i) => [`k${i}`, garbage(rand, depth + 1)]));
    case 13: return 'https://resolver.example/roots/2026-11-04/' + Math.floor(rand() * 1e6);
    case 14: { let v = []; for (let i = 0; i < 40; i++) v = [v]; return v; }
    default: return '\u2014 \n\n';
  }
}
function assertClean(result, what) {
  assert.equal(typeof result, 'object', what);
  if (result.error !== undefined) {
    assert.ok(!result.error.startsWith('internal error'), `${what}: ${result.error}`);
    assert.deepEqual(result.checks, []);
    return;
  }
  assert.deepEqual(result.checks.map((c) => c.name), [...CHECKS], what);
  for (const c of result.checks) {
    assert.ok(['PASS', 'FAIL', 'SKIP'].includes(c.status), what);
    assert.equal(typeof c.detail, 'string', what);
  }
  assert.equal(result.ok, result.checks.every((c) => c.status !== 'FAIL'));
}
const options = { roots, policy: readFileSync(join(roots, 'policy.txt')), at: AT };

test('the shipped sample verifies, and gives Python\'s details', async () => {
  const result = await verifyRecord(sample, options);
  assert.equal(result.ok, true);
  assert.deepEqual(result.checks.map((c) => c.status), ['PASS', 'PASS', 'PASS', 'PASS', 'PASS', 'PASS', 'SKIP', 'PASS', 'PASS']);
  assert.equal(result.checks[2].detail, 'leaf hash e47d736118ce0f475a86b70ca7caca9c51e2bdb0bafb68ba7205260153b76b56 from the claims (SPEC §2)');
  const token = await verifyRecord(sample.jws, options);
  assert.equal(token.ok, true);
  const text = await verifyRecord(JSON.stringify(sample), options);
  assert.equal(text.ok, true);
});

test('RECORD of any shape: an exit-2 error or nine clean checks', async () => {
  const rand = prng(38);
  const shapes = [null, undefined, 0, 1.5, true, [], {}, '', ' ', 'a.b.c', '{', '[1]', '"x"', '\ufeff{}', 'x'.repeat(2e6), new Uint8Array([0xff, 0xfe]), { jws: 5 }, { anchor: {}, proof: {} }];
  for (let i = 0; i < 60; i++) shapes.push(garbage(rand));
  for (const shape of shapes) assertClean(await verifyRecord(shape, options), `record ${JSON.stringify(shape)?.slice(0, 60)}`);
});

test('every member of an unsigned record replaced by garbage fails cleanly', async () => {
  const rand = prng(9162);
  const unsigned = { ...sample };
  delete unsigned.jws;
  const paths = [['anchor'], ['anchor', 'day'], ['anchor', 'root'], ['anchor', 'url'], ['proof'], ['proof', 'type'], ['proof', 'leaf_index'], ['proof', 'tree_size'], ['proof', 'path'], ['iss'], ['url'], ['evidence'], ['iat'], ['exp']];
  for (const path of paths) {
    for (let n = 0; n < 12; n++) {
      const copy = structuredClone(unsigned);
      let at = copy;
      for (const p of path.slice(0, -1)) at = at[p];
      at[path[path.length - 1]] = garbage(rand);
      const result = await verifyRecord(copy, options);
      assertClean(result, path.join('.'));
    }
  }
});

// A test key (generated per run) whose JWKS is the only trust: signed garbage reaches every check.
const { publicKey, privateKey } = generateKeyPairSync('ed25519');
const x = publicKey.export({ format: 'jwk' }).x;
const kid = createHash('sha256').update(`{"crv":"Ed25519","kty":"OKP","x":"${x}"}`).digest('base64url');
const keys = { keys: [{ kty: 'OKP', crv: 'Ed25519', x, kid }] };
const b64u = (s) => Buffer.from(s).toString('base64url');
function token(claims, header = { alg: 'EdDSA', kid, typ: 'capability-resolver+jws' }) {
  const input = `${b64u(JSON.stringify(header))}.${b64u(typeof claims === 'string' ? claims : JSON.stringify(claims))}`;
  return `${input}.${sign(null, Buffer.from(input), privateKey).toString('base64url')}`;
}

test('signed claims of any shape fail cleanly', async () => {
  const rand = prng(7515);
  const claims = JSON.parse(Buffer.from(sample.jws.split('.')[1], 'base64url'));
  const bodies = ['[]', '1', 'null', '{"a":1,"a":2}', '{"iat":1e400}', '{"x":"\\ud800"}', JSON.stringify({ ...claims, iat: 1.0 }).replace('"iat":1', '"iat":1.0')];
  for (const name of Object.keys(claims)) for (let n = 0; n < 6; n++) bodies.push(JSON.stringify({ ...claims, [name]: garbage(rand) }));
  for (const body of bodies) assertClean(await verifyRecord(token(body), { ...options, keys }), body.slice(0, 80));
  for (let n = 0; n < 20; n++) assertClean(await verifyRecord(token(claims, garbage(rand)), { ...options, keys }), 'header');
});

test('head, tlog-proof, checkpoint and policy of any shape fail cleanly', async () => {
  const rand = prng(12);
  const head = readFileSync(join(roots, '2026-11-04/2.json'), 'utf8');
  const proof = readFileSync(join(roots, '2026-11-04/2.tlog-proof'), 'utf8');
  const policy = readFileSync(join(roots, 'policy.txt'), 'utf8');
  const cuts = (text) => Array.from({ length: 25 }, () => {
    const i = Math.floor(rand() * text.length);
    const pick = Math.floor(rand() * 4);
    if (pick === 0) return text.slice(0, i);
    if (pick === 1) return text.slice(0, i) + String.fromCharCode(text.charCodeAt(i) ^ 1) + text.slice(i + 1);
    if (pick === 2) return text.slice(0, i) + '\n' + text.slice(i);
    return JSON.stringify(garbage(rand)) ?? 'x';
  });
  for (const h of cuts(head)) assertClean(await verifyRecord(sample, { ...options, head: h, tlogProof: proof }), `head ${h.slice(-40)}`);
  for (const p of cuts(proof)) assertClean(await verifyRecord(sample, { ...options, tlogProof: p }), `proof ${p.slice(-40)}`);
  for (const c of cuts(proof.slice(proof.indexOf('\n\n') + 2))) assertClean(await verifyRecord(sample, { ...options, tlogProof: proof, checkpoint: c }), 'checkpoint');
  for (const p of cuts(policy)) assertClean(await verifyRecord(sample, { ...options, policy: p }), `policy ${p}`);
  for (const k of [null, 5, [], {}, { keys: 5 }, { keys: [{}] }, { keys: [{ kty: 'OKP', crv: 'Ed25519', x: 'AAAA' }] }, '{', garbage(rand)]) {
    const result = await verifyRecord(sample, { ...options, keys: k === null ? '{}' : k });
    assert.ok(result.error !== undefined && !result.error.startsWith('internal'), JSON.stringify(k));
  }
  for (const bad of ['', 'x', 'c2sp.org/tlog-proof@v1\n\n', '\n\n\n']) {
    assert.throws(() => parseTlogProof(bad));
    assert.throws(() => parseNote(bad));
    await assert.rejects(parsePolicy(bad));
  }
});

test('strict JSON: duplicate names, big and float numbers, surrogates', () => {
  assert.throws(() => parseJSON('{"a":1,"a":1}'), /duplicate/);
  assert.throws(() => parseJSON('1e400'), /overflows/);
  assert.throws(() => parseJSON('"\\udc00"'), /surrogate/);
  assert.throws(() => parseJSON('\ufeff{}'), /byte order mark/);
  assert.throws(() => parseJSON('NaN'));
  assert.equal(typeof parseJSON('9007199254740993'), 'bigint');
  assert.equal(parseJSON('{"__proto__":1}').__proto__, 1);
  assert.equal(String(parseJSON('1.0')), '1.0');
});

test('fetched inputs have a size limit and a deadline', async (t) => {
  const server = createServer((req, res) => {
    if (req.url.endsWith('/keys.json') && req.url.startsWith('/big/')) { res.end('x'.repeat(2 << 20)); return; }
    if (req.url.startsWith('/slow/')) { res.writeHead(200); res.write('{'); return; }
    const path = join(roots, decodeURIComponent(req.url.replace(/^\/ok\//, '/')));
    if (!existsSync(path)) { res.writeHead(404); res.end(); return; }
    res.end(readFileSync(path));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => { server.closeAllConnections(); server.close(); });
  const base = `http://127.0.0.1:${server.address().port}`;
  const ok = await verifyRecord(sample, { ...options, roots: `${base}/ok` });
  assert.equal(ok.ok, true, JSON.stringify(ok));
  const big = await verifyRecord(sample, { ...options, roots: `${base}/big` });
  assert.match(big.error, /larger than 1048576 bytes/);
  const small = await verifyRecord(sample, { ...options, roots: `${base}/ok`, fetch: { limit: 100 } });
  assert.match(small.error, /larger than 100 bytes/);
  const started = Date.now();
  const slow = await verifyRecord(sample, { ...options, roots: `${base}/slow`, fetch: { deadlineMs: 300 } });
  assert.match(slow.error, /deadline/);
  assert.ok(Date.now() - started < 5000);
});

const python = join(repo, '.venv/bin/python');
const sampleKeys = JSON.parse(readFileSync(join(roots, 'keys.json'), 'utf8'));
const bothKeys = { keys: [...sampleKeys.keys, ...keys.keys] };
const headDoc = JSON.parse(readFileSync(join(roots, '2026-11-04/2.json'), 'utf8'));
const proofText = readFileSync(join(roots, '2026-11-04/2.tlog-proof'), 'utf8');
const policyText = readFileSync(join(roots, 'policy.txt'), 'utf8');

function mutateText(rand, text) {
  const i = Math.floor(rand() * text.length);
  const pick = Math.floor(rand() * 5);
  if (pick === 0) return text.slice(0, i);
  if (pick === 1) return text.slice(0, i) + String.fromCharCode(text.charCodeAt(i) ^ (1 << Math.floor(rand() * 7))) + text.slice(i + 1);
  if (pick === 2) return text.slice(0, i) + ['\n', ' ', '\t', '=', '+', '\u2014', '0'][Math.floor(rand() * 7)] + text.slice(i);
  if (pick === 3) return text.slice(0, i) + text.slice(i + 1);
  return text + text.slice(i);
}
function setAt(rand, obj) {
  const paths = [];
  const walk = (v, p) => {
    paths.push(p);
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...p, i]));
    else if (v && typeof v === 'object') Object.keys(v).forEach((k) => walk(v[k], [...p, k]));
  };
  walk(obj, []);
  const path = paths[1 + Math.floor(rand() * (paths.length - 1))];
  let at = obj;
  for (const k of path.slice(0, -1)) at = at[k];
  const last = path[path.length - 1];
  if (rand() < 0.15 && !Array.isArray(at)) delete at[last];
  else at[last] = garbage(rand);
}
/** One fuzz case: files to write under its folder, and verify-proof's arguments there. */
function fuzzCase(rand) {
  const claims = JSON.parse(Buffer.from(sample.jws.split('.')[1], 'base64url'));
  const record = structuredClone(sample);
  const head = structuredClone(headDoc);
  let proof = proofText; let policy = policyText; let at = AT; let ownKeys = false;
  const kind = Math.floor(rand() * 7);
  if (kind === 0) setAt(rand, record);
  else if (kind === 1) { delete record.jws; setAt(rand, record); }
  else if (kind === 2) { setAt(rand, claims); for (const k of Object.keys(record)) if (k !== 'jws' && k !== 'expires') delete record[k]; Object.assign(record, claims); record.jws = token(claims); ownKeys = true; }
  else if (kind === 3) {
    const h = JSON.parse(Buffer.from(head.jws.split('.')[1], 'base64url'));
    setAt(rand, h);
    for (const k of Object.keys(head)) delete head[k];
    Object.assign(head, h, { jws: token(h, { alg: 'EdDSA', kid, typ: 'capability-anchor+jws' }) });
    if (rand() < 0.3) setAt(rand, head);
    ownKeys = true;
  } else if (kind === 4) proof = mutateText(rand, proof);
  else if (kind === 5) policy = mutateText(rand, policy);
  else at = AT + Math.floor((rand() - 0.5) * 4 * 172800);
  return { record: JSON.stringify(record), head: JSON.stringify(head), proof, policy, at, keys: JSON.stringify(ownKeys ? bothKeys : sampleKeys) };
}

test('seeded garbage at every depth gives Python verify-proof\'s verdicts', { skip: !existsSync(python) && 'no .venv' }, async (t) => {
  const rand = prng(Number(process.env.VERIFY_JS_SEED ?? 2026));
  const dir = mkdtempSync(join(tmpdir(), 'verify-js-'));
  const cases = [];
  for (let n = 0; n < Number(process.env.VERIFY_JS_FUZZ ?? 120); n++) {
    const c = fuzzCase(rand);
    const d = join(dir, `c${n}`);
    mkdirSync(join(d, 'roots/2026-11-04'), { recursive: true });
    writeFileSync(join(d, 'record.json'), c.record);
    writeFileSync(join(d, 'roots/2026-11-04/2.json'), c.head);
    writeFileSync(join(d, 'roots/2026-11-04/2.tlog-proof'), c.proof);
    writeFileSync(join(d, 'roots/keys.json'), c.keys);
    writeFileSync(join(d, 'policy.txt'), c.policy);
    cases.push({ dir: d, args: [join(d, 'record.json'), '--roots', join(d, 'roots'), '--policy', join(d, 'policy.txt'), '--at', String(c.at)] });
  }
  const script = `
import contextlib, io, json, sys
from capability_anchor.cli.verify_proof import main
out = []
for args in json.load(sys.stdin):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        code = main([*args, "--json"])
    out.append({"exit": code, "checks": json.loads(buf.getvalue())["checks"] if code != 2 else []})
print(json.dumps(out))`;
  const answers = JSON.parse(execFileSync(python, ['-c', script], { input: JSON.stringify(cases.map((c) => c.args)), env: { ...process.env, PYTHONPATH: join(repo, 'src') }, maxBuffer: 1 << 26 }));
  const seen = new Map();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const [i, c] of cases.entries()) {
    const opts = { roots: join(c.dir, 'roots'), policy: readFileSync(join(c.dir, 'policy.txt')), at: Number(c.args[6]) };
    const result = await verifyRecord(new Uint8Array(readFileSync(c.args[0])), opts);
    const exit = result.error !== undefined ? 2 : result.ok ? 0 : 1;
    const want = answers[i];
    const shown = `case ${c.dir}: JS ${JSON.stringify(result.error ?? result.checks.map((x) => `${x.status} ${x.name}: ${x.detail}`))}\nPython ${JSON.stringify(want.checks.map((x) => `${x.result} ${x.name}: ${x.detail}`))}`;
    assert.equal(exit, want.exit, shown);
    want.checks.forEach((x, j) => assert.equal(result.checks[j].status, x.result, shown));
    for (const x of result.checks) seen.set(`${x.name} ${x.status}`, (seen.get(`${x.name} ${x.status}`) ?? 0) + 1);
    seen.set(`exit ${exit}`, (seen.get(`exit ${exit}`) ?? 0) + 1);
  }
  // The garbage reaches every check: each one both passes and fails somewhere.
  for (const name of CHECKS.filter((n) => n !== 'timestamp')) {
    assert.ok(seen.get(`${name} FAIL`) > 0 && seen.get(`${name} PASS`) > 0, `${name}: ${JSON.stringify([...seen])}`);
  }
  assert.ok(seen.get('exit 2') > 0 && seen.get('exit 0') > 0);
});

test('without roots or head: the head from anchor.url, the proof from /history/proof?leaf_hash=', async () => {
  const { headLeafHash } = await import('../../src/verify-js/verify.mjs');
  const head = readFileSync(join(roots, '2026-11-04/2.json'));
  const leafHash = await headLeafHash(head.toString());
  assert.equal(leafHash, await headLeafHash(JSON.parse(head)));
  assert.equal(leafHash, await headLeafHash(JSON.parse(head).jws));
  const asked = [];
  const fetcher = async (url) => {
    asked.push(url);
    const body = {
      'https://resolver.example/roots/2026-11-04/2': head,
      [`https://resolver.example/history/proof?leaf_hash=${leafHash}`]: readFileSync(join(roots, '2026-11-04/2.tlog-proof')),
    }[url];
    return new Response(body ?? null, { status: body ? 200 : 404 });
  };
  const keys = JSON.parse(readFileSync(join(roots, 'keys.json')));
  const result = await verifyRecord(sample, { keys, policy: options.policy, at: AT, fetch: { fetch: fetcher } });
  assert.equal(result.ok, true, JSON.stringify(result));
  assert.equal(asked.length, 2);
  assert.match(result.checks[7].detail, /history\/proof\?leaf_hash=/);
  const missing = await verifyRecord(sample, { keys, policy: options.policy, at: AT, fetch: { fetch: async () => new Response(null, { status: 404 }) } });
  assert.match(missing.error, /HTTP 404/); // as verify-proof: a head URL that answers 404 is an I/O error
});

test('inputs at their size limits fail cleanly', async () => {
  const proof = readFileSync(join(roots, '2026-11-04/2.tlog-proof'), 'utf8');
  const bigExtra = proof.replace(/^extra [^\n]*/m, `extra ${Buffer.alloc(700000, 65).toString('base64')}`);
  const r1 = await verifyRecord(sample, { ...options, tlogProof: bigExtra });
  assert.equal(r1.checks[7].status, 'FAIL');
  const longPath = proof.replace(/^index 6$/m, `index 6\n${'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n'.repeat(20000)}`);
  const r2 = await verifyRecord(sample, { ...options, tlogProof: longPath });
  assert.equal(r2.checks[7].status, 'FAIL');
  const deep = `{"a":${'['.repeat(5000)}${']'.repeat(5000)}}`;
  assert.match((await verifyRecord(deep, options)).error, /RECORD is not valid JSON/);
  const wide = { ...structuredClone(sample), jws: undefined, evidence: Array.from({ length: 100000 }, () => 0) };
  delete wide.jws;
  const r3 = await verifyRecord(wide, options);
  assert.equal(r3.checks[2].status, 'FAIL');
  assert.match(r3.checks[2].detail, /over the limit of 16384/);
});

test('Ed25519 as libsodium (Python) checks it: no small-order key or R, no S past the group order', async () => {
  const claims = JSON.parse(Buffer.from(sample.jws.split('.')[1], 'base64url'));
  // The identity point as a trusted key: OpenSSL accepts R = identity, S = 0 for any message.
  for (const point of ['01' + '00'.repeat(31), 'ec' + 'ff'.repeat(30) + '7f', 'ee' + 'ff'.repeat(30) + '7f']) {
    const x = Buffer.from(point, 'hex').toString('base64url');
    const weak = { keys: [{ kty: 'OKP', crv: 'Ed25519', x, kid: 'weak' }] };
    const header = b64u(JSON.stringify({ alg: 'EdDSA', kid: 'weak', typ: 'capability-resolver+jws' }));
    const forged = `${header}.${b64u(JSON.stringify(claims))}.${Buffer.from('01' + '00'.repeat(63), 'hex').toString('base64url')}`;
    const result = await verifyRecord(forged, { ...options, keys: weak });
    assert.equal(result.checks[0].status, 'FAIL', point);
    assert.match(result.checks[0].detail, /SignatureMismatch/);
  }
  // S + L: the same signature in a second spelling.
  const good = token(claims);
  const sig = Buffer.from(good.split('.')[2], 'base64url');
  let s = BigInt('0x' + Buffer.from(sig.subarray(32)).reverse().toString('hex'));
  s += 2n ** 252n + 27742317777372353535851937790883648493n;
  const bytes = Buffer.from(s.toString(16).padStart(64, '0'), 'hex').reverse();
  const malleated = `${good.split('.').slice(0, 2).join('.')}.${Buffer.concat([sig.subarray(0, 32), bytes]).toString('base64url')}`;
  assert.equal((await verifyRecord(good, { ...options, keys })).checks[0].status, 'PASS');
  assert.equal((await verifyRecord(malleated, { ...options, keys })).checks[0].status, 'FAIL');
});
