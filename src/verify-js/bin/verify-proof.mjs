#!/usr/bin/env node
// verify-proof in JavaScript: the same arguments, lines and exit codes as the Python command
// (SPEC §9, §12.5): 0 every check that ran passed, 1 a check failed, 2 usage or I/O.
import { openSync, readSync, closeSync } from 'node:fs';
import { verifyRecord, parseAt, fetchBounded } from '../verify.mjs';

const PROG = 'verify-proof';
const USAGE = `usage: ${PROG} RECORD [--roots DIR|URL] [--keys FILE|URL] [--head FILE|URL] [--history-proof FILE|URL]
                    [--policy FILE|URL] [--origin ORIGIN] [--iss ORIGIN] [--at TIME] [--tsa-ca PEM]
                    [--deadline S] [--json]`;
const VALUED = ['--roots', '--keys', '--head', '--history-proof', '--policy', '--origin', '--iss', '--at', '--tsa-ca', '--deadline'];

class Usage extends Error {}

function parseArgs(argv) {
  const args = { tsaCa: [], json: false };
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    let value;
    if (a.startsWith('--') && a.includes('=')) { value = a.slice(a.indexOf('=') + 1); a = a.slice(0, a.indexOf('=')); }
    if (a === '-h' || a === '--help') { process.stdout.write(`${USAGE}\n`); process.exit(0); }
    if (a === '--json') args.json = true;
    else if (VALUED.includes(a)) {
      if (value === undefined) {
        if (i + 1 >= argv.length) throw new Usage(`argument ${a}: expected one argument`);
        value = argv[++i];
      }
      const key = a.slice(2).replace(/-([a-z])/g, (_, c) => c.toUpperCase());
      if (key === 'tsaCa') args.tsaCa.push(value);
      else args[key] = value;
    } else if (a.startsWith('-') && a !== '-') throw new Usage(`unrecognized arguments: ${a}`);
    else if (args.record === undefined) args.record = a;
    else throw new Usage(`unrecognized arguments: ${a}`);
  }
  if (args.record === undefined) throw new Usage('the following arguments are required: RECORD');
  return args;
}

const isUrl = (s) => /^https?:\/\//i.test(s);

/** A file's bytes, at most `limit` (read no further, as verify-proof's bounded reads). */
async function readLocal(path, limit = 1 << 20) {
  let fd;
  try { fd = openSync(path, 'r'); } catch (e) {
    throw new Error(`cannot read ${path}: ${e.code === 'ENOENT' ? 'No such file or directory' : e.message}`);
  }
  try {
    const buffer = new Uint8Array(limit + 1);
    let n = 0;
    for (let got = 1; got > 0 && n <= limit; n += got) got = readSync(fd, buffer, n, limit + 1 - n, null);
    if (n > limit) throw new Error(`${path}: larger than ${limit} bytes, the limit for this input (read no further)`);
    return buffer.slice(0, n);
  } catch (e) {
    if (e.message.includes('larger than')) throw e;
    throw new Error(`cannot read ${path}: ${e.code === 'EISDIR' ? 'Is a directory' : e.message}`);
  } finally { closeSync(fd); }
}
async function readStdin(limit = 1 << 20) {
  const chunks = []; let n = 0;
  for await (const chunk of process.stdin) {
    n += chunk.length;
    if (n > limit) throw new Error(`stdin (RECORD -): larger than ${limit} bytes, the limit for this input (read no further)`);
    chunks.push(chunk);
  }
  return new Uint8Array(Buffer.concat(chunks));
}
function checkPem(data, where) {
  const text = new TextDecoder().decode(data);
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g);
  if (!blocks) throw new Error(`${where}: no PEM certificate in it`);
}

async function main(argv) {
  let args;
  try { args = parseArgs(argv); } catch (e) {
    process.stderr.write(`${USAGE}\n${PROG}: error: ${e.message}\n`);
    return 2;
  }
  const options = { fetch: {} };
  try {
    if (args.deadline !== undefined) {
      const s = Number(args.deadline);
      if (!(s > 0) || !Number.isFinite(s)) throw new Error(`--deadline must be a positive number of seconds, got ${args.deadline}`);
      options.fetch.deadlineMs = s * 1000;
    }
    if (args.at !== undefined) {
      options.at = parseAt(args.at);
      if (options.at === null) throw new Error(`--at must be RFC 3339 (with a zone) or epoch seconds, got '${args.at}'`);
    }
    if (args.roots !== undefined) options.roots = args.roots;
    if (args.keys !== undefined) {
      options.keysWhere = args.keys;
      options.keys = isUrl(args.keys) ? await fetchText(args.keys, options) : await readLocal(args.keys);
      // As verify-proof: beside a --keys URL .../keys, the log's key records at .../keys/records.
      if (args.roots === undefined && isUrl(args.keys) && args.keys.replace(/\/+$/, '').endsWith('/keys')) {
        options.keyRecords = await fetchText(`${args.keys.replace(/\/+$/, '')}/records`, options, true);
      }
    } else if (args.roots === undefined) throw new Error('no trusted keys: give --keys FILE|URL or --roots DIR (keys.json)');
    const record = args.record === '-' ? await readStdin() : isUrl(args.record) ? await fetchText(args.record, options) : await readLocal(args.record);
    for (const pem of args.tsaCa) checkPem(await readLocal(pem), pem);
    if (args.tsaCa.length) options.tsaCa = true;
    if (args.policy !== undefined) {
      options.policyWhere = args.policy;
      options.policy = isUrl(args.policy) ? await fetchText(args.policy, options, false, 256 * 1024) : await readLocal(args.policy, 256 * 1024);
    }
    if (args.head !== undefined) {
      options.headWhere = args.head;
      options.head = isUrl(args.head) ? await fetchText(args.head, options) : await readLocal(args.head);
    }
    if (args.historyProof !== undefined) {
      options.tlogProofWhere = args.historyProof;
      options.tlogProof = isUrl(args.historyProof) ? await fetchText(args.historyProof, options, false, 1024 * 1024 + 64 * 1024) : await readLocal(args.historyProof, 1024 * 1024 + 64 * 1024);
    }
    if (args.origin !== undefined) options.origin = args.origin;
    if (args.iss !== undefined) options.iss = args.iss;
    const result = await verifyRecord(record, options);
    if (result.error !== undefined) throw new Error(result.error);
    if (args.json) {
      // Python's json.dumps spacing, so both commands print the same bytes.
      const checks = result.checks.map((c) => `{"name": ${JSON.stringify(c.name)}, "result": "${c.status}", "detail": ${JSON.stringify(c.detail)}}`);
      process.stdout.write(`{"ok": ${result.ok}, "checks": [${checks.join(', ')}]}\n`);
    } else {
      let out = '';
      for (const c of result.checks) out += `${c.status} ${c.name}: ${c.detail}\n`;
      if (result.checks[0].status === 'SKIP' && result.checks[0].detail.startsWith('the record is unsigned')) {
        out += 'note: RECORD is unsigned: no resolver signature vouches for any of its members; the checks above show only that its leaf members are in the log\'s tree\n';
      }
      process.stdout.write(out);
    }
    return result.ok ? 0 : 1;
  } catch (e) {
    process.stderr.write(`${PROG}: ${e.message}\n`);
    return 2;
  }
}

/** A URL named for RECORD, --keys, --policy, --head or --history-proof: one bounded GET. */
async function fetchText(url, options, ifFound = false, limit = 1 << 20) {
  const found = await fetchBounded(url, { limit, deadlineMs: options.fetch.deadlineMs ?? 30000, ifFound });
  return found === null ? undefined : found;
}

process.exitCode = await main(process.argv.slice(2));
