#!/usr/bin/env node
// verify-proof in JavaScript: the same arguments, lines and exit codes as the Python command
// (SPEC §9, §12.5): 0 every check that ran passed, 1 a check failed, 2 usage or I/O.
import { verifyRecord, parseAt, reader, isUrl, LIMITS, CHECKS } from '../verify.mjs';

const PROG = 'verify-proof';
const USAGE = `usage: ${PROG} RECORD [--roots DIR|URL] [--keys FILE|URL] [--head FILE|URL] [--history-proof FILE|URL]
                    [--policy FILE|URL] [--origin ORIGIN] [--iss ORIGIN] [--at TIME] [--tsa-ca PEM]
                    [--deadline S] [--json] [--explain]`;
const VALUED = ['--roots', '--keys', '--head', '--history-proof', '--policy', '--origin', '--iss', '--at', '--tsa-ca', '--deadline'];

const HELP = `${USAGE}

Verify a resolver-2 record's anchor and proof offline (SPEC §9), and its head's place in the
log's witnessed history (SPEC §12.5), as verify-proof does. Trust comes only from --keys or
--roots DIR/keys.json (and --policy), never from the record or the head.

checks, always all listed, in this order: ${CHECKS.join(', ')}
(timestamp: a stamp's imprint is checked, its CMS signature and TSA chain are not)

exit codes:
  0 every check that ran passed (SKIPs do not fail)
  1 a check failed
  2 usage or I/O error: bad arguments, no trusted keys, missing or unreadable files, an
    unreachable URL or one over its deadline or size limit, malformed JSON in RECORD, --keys
    or keys.json, a malformed --policy
`;

class Usage extends Error {}

function parseArgs(argv) {
  const args = { tsaCa: [], json: false };
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    let value;
    if (a.startsWith('--') && a.includes('=')) { value = a.slice(a.indexOf('=') + 1); a = a.slice(0, a.indexOf('=')); }
    if (a === '-h' || a === '--help') { process.stdout.write(HELP); process.exit(0); }
    if (a === '--json') args.json = true;
    else if (a === '--explain') args.explain = true;
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
    const read = reader(options);  // RECORD, --keys, --policy, --head, --history-proof: a file or URL
    if (args.keys !== undefined) {
      options.keysWhere = args.keys;
      options.keys = await read(args.keys, LIMITS.input);
      // As verify-proof: beside a --keys URL .../keys, the log's key records at .../keys/records.
      if (args.roots === undefined && isUrl(args.keys) && args.keys.replace(/\/+$/, '').endsWith('/keys')) {
        options.keyRecords = await read(`${args.keys.replace(/\/+$/, '')}/records`, LIMITS.input, true);
      }
    } else if (args.roots === undefined) throw new Error('no trusted keys: give --keys FILE|URL or --roots DIR (keys.json)');
    const record = args.record === '-' ? await readStdin() : await read(args.record, LIMITS.input);
    for (const pem of args.tsaCa) checkPem(await read(pem, LIMITS.input), pem);
    if (args.tsaCa.length) options.tsaCa = true;
    if (args.policy !== undefined) {
      options.policyWhere = args.policy;
      options.policy = await read(args.policy, LIMITS.policy);
    }
    if (args.head !== undefined) {
      options.headWhere = args.head;
      options.head = await read(args.head, LIMITS.input);
    }
    if (args.historyProof !== undefined) {
      options.tlogProofWhere = args.historyProof;
      options.tlogProof = await read(args.historyProof, LIMITS.proof);
    }
    if (args.origin !== undefined) options.origin = args.origin;
    if (args.iss !== undefined) options.iss = args.iss;
    const result = await verifyRecord(record, options);
    if (result.error !== undefined) throw new Error(result.error);
    for (const notice of result.notices) process.stderr.write(`${PROG}: notice: ${notice}\n`);
    if (args.explain) {
      let lines = '';
      for (const line of result.explain.inclusion.length ? result.explain.inclusion : ['inclusion: no hash steps (the check did not run)']) lines += `explain: ${line}\n`;
      for (const line of result.explain.history.length ? result.explain.history : ['no hash steps (the check did not run)']) lines += `explain: history: ${line}\n`;
      (args.json ? process.stderr : process.stdout).write(lines);
    }
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

process.exitCode = await main(process.argv.slice(2));
