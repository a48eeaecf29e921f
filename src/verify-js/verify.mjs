// capability-anchor-verify: the nine checks of `verify-proof` (SPEC §9, §12.5) in one
// dependency-free ES module, for Node >= 18 (node:crypto) and browsers (WebCrypto), from one
// source. It is served as /verify.js, so it has no relative imports. The Python verifier
// (src/capability_anchor/verify/) is the reference: same check names, same statuses on the
// same inputs (SPEC §14.4; tests/js/parity.test.mjs). Why it is built so:
// docs/explanation/decisions/38-verify-js.md.

/** The nine checks of verify-proof, in their order. */
export const CHECKS = Object.freeze([
  'record_signature', 'record_lifetime', 'leaf', 'inclusion',
  'head_signature', 'head_matches', 'timestamp', 'history', 'witnesses',
]);

/** Every input's limits: bytes (Python's bounded.read INPUT_LIMIT, note/proof/policy sizes). */
export const LIMITS = Object.freeze({
  input: 1 << 20,
  note: 1024 * 1024,
  proof: 1024 * 1024 + 64 * 1024,
  policy: 256 * 1024,
  deadlineMs: 30000,
});

const HEAD_TYP = 'capability-anchor+jws';
const RECORD_TYP = 'capability-resolver+jws';
const KEY_TYP = 'capability-anchor-key+jws';
const REVOCATION_TYP = 'capability-anchor-revocation+jws';
const MAX_RECORD_LIFETIME = 172800;
const CLOCK_SKEW = 300;
const MAX_SAFE = 2 ** 53 - 1;
const MAX_LEAF_BYTES = 16384;
const MAX_DEPTH = 32;
const RESERVED = new Set(['iat', 'exp', 'anchor', 'proof', 'jws', 'expires']);
const EM_DASH = '\u2014';

// --- errors: Python's class names, so a detail reads the same ------------------------------

class VerifyError extends Error {
  constructor(kind, message) { super(message); this.kind = kind; }
}
const fail = (kind, message) => { throw new VerifyError(kind, message); };
/** An input that cannot be read: verify-proof exits 2. */
class InputError extends Error {}
const NOTE_ERRORS = new Set(['MalformedNote', 'MalformedVKey', 'NoteSignatureError', 'MalformedPolicy', 'QuorumNotMet']);

// --- platform: node:crypto in Node (synchronous), WebCrypto elsewhere -----------------------

let platformPromise = null;
function platform() {
  if (platformPromise === null) platformPromise = loadPlatform();
  return platformPromise;
}
const IS_NODE = typeof process !== 'undefined' && process.versions != null && process.versions.node != null;

async function loadPlatform() {
  if (IS_NODE) {
    const [c, fs] = await Promise.all([import('node:crypto'), import('node:fs')]);
    const keys = new Map();
    return {
      fs,
      sha256: (data) => new Uint8Array(c.createHash('sha256').update(data).digest()),
      verify: (raw, message, signature) => {
        const id = hex(raw);
        let key = keys.get(id);
        if (key === undefined) {
          key = c.createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: b64urlEncode(raw) }, format: 'jwk' });
          if (keys.size >= 256) keys.delete(keys.keys().next().value);
          keys.set(id, key);
        }
        try { return c.verify(null, message, key, signature); } catch { return false; }
      },
    };
  }
  const subtle = globalThis.crypto?.subtle;
  if (subtle === undefined) throw new InputError('WebCrypto is not available here (it needs an https page or localhost)');
  const keys = new Map();
  return {
    sha256: async (data) => new Uint8Array(await subtle.digest('SHA-256', data)),
    verify: async (raw, message, signature) => {
      const id = hex(raw);
      let key = keys.get(id);
      if (key === undefined) {
        key = await subtle.importKey('raw', raw, { name: 'Ed25519' }, false, ['verify']);
        if (keys.size >= 256) keys.delete(keys.keys().next().value);
        keys.set(id, key);
      }
      try { return await subtle.verify({ name: 'Ed25519' }, key, signature, message); } catch { return false; }
    },
  };
}

// --- bytes and encodings -------------------------------------------------------------------

const encoder = new TextEncoder();
const utf8 = (text) => encoder.encode(text);
const strictDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
function concat(...parts) {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}
function equalBytes(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
/** Lowercase hex of bytes. */
export function hex(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i++) s += HEX[bytes[i]];
  return s;
}
function fromHex(text) {
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(text.substr(2 * i, 2), 16);
  return out;
}
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
function encode64(bytes, alphabet, pad) {
  let s = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    s += alphabet[n >> 18] + alphabet[(n >> 12) & 63] + alphabet[(n >> 6) & 63] + alphabet[n & 63];
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i] << 16;
    s += alphabet[n >> 18] + alphabet[(n >> 12) & 63] + (pad ? '==' : '');
  } else if (rest === 2) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8);
    s += alphabet[n >> 18] + alphabet[(n >> 12) & 63] + alphabet[(n >> 6) & 63] + (pad ? '=' : '');
  }
  return s;
}
const REV64 = new Int16Array(128).fill(-1);
const REV64URL = new Int16Array(128).fill(-1);
for (let i = 0; i < 64; i++) { REV64[B64.charCodeAt(i)] = i; REV64URL[B64URL.charCodeAt(i)] = i; }
function decode64(text, rev) {
  const out = new Uint8Array(Math.floor((text.length * 3) / 4));
  let bits = 0; let acc = 0; let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const v = c < 128 ? rev[c] : -1;
    if (v < 0) return null;
    acc = (acc << 6) | v; bits += 6;
    if (bits >= 8) { bits -= 8; out[n++] = (acc >> bits) & 255; }
  }
  return out.subarray(0, n);
}
export const b64urlEncode = (bytes) => encode64(bytes, B64URL, false);
export const b64Encode = (bytes) => encode64(bytes, B64, true);
/** Canonical unpadded base64url (RFC 7515 §2), or a thrown JWSEncodingError-like message. */
function b64urlDecode(text) {
  if (typeof text !== 'string' || !/^[A-Za-z0-9_-]*$/.test(text)) throw new Error('not unpadded base64url (only A-Z a-z 0-9 - _ are allowed)');
  if (text.length % 4 === 1) throw new Error('base64url length is impossible (length mod 4 == 1)');
  const data = decode64(text, REV64URL);
  if (b64urlEncode(data) !== text) throw new Error('non-canonical base64url (unused trailing bits are set)');
  return data;
}
/** Strict, canonical, padded standard base64 (C2SP texts); MalformedNote otherwise. */
function b64Decode(text, what) {
  const shown = pyRepr(text.slice(0, 80));
  if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) fail('MalformedNote', `${what} is not standard padded base64: ${shown}`);
  const data = decode64(text.replace(/=+$/, ''), REV64);
  if (data === null) fail('MalformedNote', `${what} is not standard padded base64: ${shown}`);
  if (b64Encode(data) !== text) fail('MalformedNote', `${what} is not canonical base64: ${shown}`);
  return data;
}

// Python's repr() and str() of JSON values, for details that read like verify-proof's.
function pyRepr(value) {
  if (typeof value === 'string') {
    let body = '';
    const quote = value.includes("'") && !value.includes('"') ? '"' : "'";
    for (const ch of value) {
      const c = ch.codePointAt(0);
      if (ch === '\\') body += '\\\\';
      else if (ch === quote) body += '\\' + ch;
      else if (ch === '\n') body += '\\n';
      else if (ch === '\r') body += '\\r';
      else if (ch === '\t') body += '\\t';
      else if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || (c >= 0xd800 && c <= 0xdfff)) {
        body += c <= 0xff ? '\\x' + c.toString(16).padStart(2, '0') : '\\u' + c.toString(16).padStart(4, '0');
      } else body += ch;
    }
    return quote + body + quote;
  }
  if (Array.isArray(value)) return '[' + value.map(pyRepr).join(', ') + ']';
  if (isObject(value)) return '{' + Object.keys(value).map((k) => `${pyRepr(k)}: ${pyRepr(value[k])}`).join(', ') + '}';
  return pyStr(value);
}
function pyStr(value) {
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (value instanceof JsonFloat) return value.toString();
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  return pyRepr(value);
}
function typeName(value) {
  if (value === null || value === undefined) return 'NoneType';
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'string') return 'str';
  if (value instanceof JsonFloat || (typeof value === 'number' && !Number.isInteger(value))) return 'float';
  if (typeof value === 'number' || typeof value === 'bigint') return 'int';
  if (Array.isArray(value)) return 'list';
  return 'dict';
}
function jsonTypeName(value) {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'boolean') return 'boolean';
  if (typeof value === 'string') return 'string';
  if (typeof value === 'number' || typeof value === 'bigint' || value instanceof JsonFloat) return 'number';
  return Array.isArray(value) ? 'array' : 'object';
}

// --- strict JSON (Python's strictjson.loads): one meaning per document --------------------

/** A JSON number written with a fraction or exponent (Python reads it as a float, never an int). */
export class JsonFloat {
  constructor(value) { this.value = value; }
  valueOf() { return this.value; }
  toString() { // Python's repr of a float: shortest digits, exponent form outside 1e-4 <= |v| < 1e16
    const v = this.value;
    if (!Number.isFinite(v)) return v > 0 ? 'inf' : v < 0 ? '-inf' : 'nan';
    if (v === 0) return Object.is(v, -0) ? '-0.0' : '0.0';
    const [mantissa, exp] = v.toExponential().split('e');
    const e = Number(exp);
    if (e >= -4 && e < 16) { const fixed = String(v); return fixed.includes('.') ? fixed : `${fixed}.0`; }
    return `${mantissa}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  }
}
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof JsonFloat) && !(v instanceof Uint8Array);
const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
/** An integer and not a boolean (Python's strictjson.is_int). */
const isInt = (v) => (typeof v === 'number' && Number.isInteger(v)) || typeof v === 'bigint';
const toNumberish = (v) => (v instanceof JsonFloat ? v.value : v);
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Parse strict JSON text (a string or UTF-8 bytes) as Python's strictjson does: no BOM, strict
 * UTF-8, no duplicate member names, no NaN or overflowing numbers, no lone surrogates. Integers
 * are numbers (BigInt past 2^53-1), other numbers JsonFloat; objects have no prototype.
 */
export function parseJSON(data) {
  let text = data;
  if (data instanceof Uint8Array) {
    if (data[0] === 0xef && data[1] === 0xbb && data[2] === 0xbf) throw new SyntaxError('text starts with a UTF-8 byte order mark');
    try { text = strictDecoder.decode(data); } catch { throw new SyntaxError('not UTF-8'); }
  } else if (typeof data !== 'string') {
    throw new SyntaxError(`JSON text must be str or bytes, got ${typeName(data)}`);
  } else if (data.startsWith('\ufeff')) {
    throw new SyntaxError('text starts with a byte order mark (U+FEFF)');
  }
  const value = new Parser(text).document();
  if (LONE_SURROGATE.test(text) || hasLoneSurrogate(value)) throw new SyntaxError('a string contains a lone surrogate');
  return value;
}
function hasLoneSurrogate(value) {
  const stack = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === 'string') { if (LONE_SURROGATE.test(v)) return true; } else if (Array.isArray(v)) for (const x of v) stack.push(x);
    else if (isObject(v)) for (const k of Object.keys(v)) { if (LONE_SURROGATE.test(k)) return true; stack.push(v[k]); }
  }
  return false;
}
const ESCAPES = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
class Parser {
  constructor(text) { this.t = text; this.i = 0; this.depth = 0; }
  error(what) {
    const before = this.t.slice(0, this.i);
    const line = before.split('\n').length;
    const col = this.i - before.lastIndexOf('\n');
    throw new SyntaxError(`${what} at line ${line} column ${col} (char ${this.i})`);
  }
  ws() {
    const t = this.t;
    let c = t.charCodeAt(this.i);
    while (c === 32 || c === 9 || c === 10 || c === 13) c = t.charCodeAt(++this.i);
  }
  document() {
    this.ws();
    const v = this.value();
    this.ws();
    if (this.i < this.t.length) this.error('Extra data');
    return v;
  }
  value() {
    const c = this.t[this.i];
    if (c === '{') return this.object();
    if (c === '[') return this.array();
    if (c === '"') return this.string();
    if (c === '-' || (c >= '0' && c <= '9')) return this.number();
    if (this.t.startsWith('true', this.i)) { this.i += 4; return true; }
    if (this.t.startsWith('false', this.i)) { this.i += 5; return false; }
    if (this.t.startsWith('null', this.i)) { this.i += 4; return null; }
    if (this.t.startsWith('NaN', this.i)) throw new SyntaxError('NaN is not a JSON number');
    if (this.t.startsWith('Infinity', this.i)) throw new SyntaxError('Infinity is not a JSON number');
    return this.error('Expecting value');
  }
  // 988: where verify-proof's parse of RECORD stops (at Python's recursion limit).
  enter() { if (++this.depth > 988) throw new SyntaxError('nested too deeply to parse'); }
  object() {
    this.enter();
    const out = Object.create(null);
    this.i++;
    this.ws();
    if (this.t[this.i] === '}') { this.i++; this.depth--; return out; }
    for (;;) {
      if (this.t[this.i] !== '"') this.error('Expecting property name enclosed in double quotes');
      const key = this.string();
      this.ws();
      if (this.t[this.i] !== ':') this.error("Expecting ':' delimiter");
      this.i++;
      this.ws();
      const v = this.value();
      if (has(out, key)) throw new SyntaxError(`duplicate member name ${pyRepr(key.length <= 40 ? key : key.slice(0, 40) + '...')}`);
      out[key] = v;
      this.ws();
      const c = this.t[this.i++];
      if (c === '}') { this.depth--; return out; }
      if (c !== ',') { this.i--; this.error("Expecting ',' delimiter"); }
      this.ws();
    }
  }
  array() {
    this.enter();
    const out = [];
    this.i++;
    this.ws();
    if (this.t[this.i] === ']') { this.i++; this.depth--; return out; }
    for (;;) {
      this.ws();
      out.push(this.value());
      this.ws();
      const c = this.t[this.i++];
      if (c === ']') { this.depth--; return out; }
      if (c !== ',') { this.i--; this.error("Expecting ',' delimiter"); }
    }
  }
  string() {
    const t = this.t;
    let i = ++this.i;
    let out = '';
    for (;;) {
      const start = i;
      let c = t.charCodeAt(i);
      while (i < t.length && c !== 34 && c !== 92 && c >= 0x20) c = t.charCodeAt(++i);
      out += t.slice(start, i);
      if (i >= t.length) { this.i = i; this.error('Unterminated string starting'); }
      if (c === 34) { this.i = i + 1; return out; }
      if (c < 0x20) { this.i = i; this.error('Invalid control character'); }
      const e = t[i + 1];
      if (e === 'u') {
        const h = t.slice(i + 2, i + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(h)) { this.i = i; this.error('Invalid \\uXXXX escape'); }
        out += String.fromCharCode(parseInt(h, 16));
        i += 6;
      } else if (e !== undefined && has(ESCAPES, e)) {
        out += ESCAPES[e];
        i += 2;
      } else { this.i = i; this.error('Invalid \\escape'); }
    }
  }
  number() {
    const m = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/y;
    m.lastIndex = this.i;
    const found = m.exec(this.t);
    if (found === null) return this.error('Expecting value');
    this.i = m.lastIndex;
    const text = found[0];
    const v = Number(text);
    if (!Number.isFinite(v)) throw new SyntaxError(`number ${text.length <= 40 ? text : text.slice(0, 40) + '...'} overflows a double`);
    if (found[1] !== undefined || found[2] !== undefined) return new JsonFloat(v);
    return Number.isSafeInteger(v) ? v : BigInt(text);
  }
}
function loadObject(data, what, kind, notObject = '{what} is not a JSON object') {
  let value;
  try { value = parseJSON(data); } catch (e) { fail(kind, `${what} is not valid JSON: ${e.message}`); }
  if (!isObject(value)) fail(kind, notObject.replace('{what}', what).replace('{type}', jsonTypeName(value)));
  return value;
}

// --- RFC 8785 (JCS) and the leaf (SPEC §2) --------------------------------------------------

function jcsString(s) {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 34) out += '\\"';
    else if (c === 92) out += '\\\\';
    else if (c < 0x20) {
      out += { 8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r' }[c] ?? '\\u' + c.toString(16).padStart(4, '0');
    } else out += s[i];
  }
  return out + '"';
}
/** RFC 8785 (JCS) text of a JSON value (numbers as ECMAScript writes them). */
export function canonicalize(value) {
  if (value === null) return 'null';
  if (value === true) return 'true';
  if (value === false) return 'false';
  if (typeof value === 'string') return jcsString(value);
  if (typeof value === 'number' || value instanceof JsonFloat) {
    const v = toNumberish(value);
    if (!Number.isFinite(v)) throw new Error(`number ${v} is not finite`);
    return String(v);
  }
  if (typeof value === 'bigint') {
    if (value > BigInt(MAX_SAFE) || value < -BigInt(MAX_SAFE)) throw new Error('integer out of the I-JSON range');
    return String(value);
  }
  if (Array.isArray(value)) return '[' + value.map(canonicalize).join(',') + ']';
  if (isObject(value)) {
    return '{' + Object.keys(value).sort().map((k) => jcsString(k) + ':' + canonicalize(value[k])).join(',') + '}';
  }
  throw new Error(`${typeof value} is not a JSON value`);
}

function pointer(path) {
  return path.map((p) => '/' + String(p).slice(0, 40).concat(String(p).length > 40 ? '...' : '').replaceAll('~', '~0').replaceAll('/', '~1')).join('');
}
function invalid(path, problem) {
  fail('InvalidRecord', `invalid record ${path.length ? 'at ' + pointer(path) : 'at the top level'}: ${problem}`);
}
function walkRecord(value, path, depth) {
  if (typeof value === 'string') {
    if (LONE_SURROGATE.test(value)) invalid(path, 'string contains a lone surrogate');
  } else if (Array.isArray(value)) {
    if (depth > MAX_DEPTH) invalid(path, `nesting depth ${depth} exceeds the limit of ${MAX_DEPTH}`);
    value.forEach((item, i) => walkRecord(item, [...path, i], depth + 1));
  } else if (isObject(value)) {
    if (depth > MAX_DEPTH) invalid(path, `nesting depth ${depth} exceeds the limit of ${MAX_DEPTH}`);
    const names = Object.keys(value);
    for (const k of names) if (LONE_SURROGATE.test(k)) invalid([...path, k], 'member name contains a lone surrogate');
    for (const k of names) walkRecord(value[k], [...path, k], depth + 1);
  } else if (typeof value === 'number' || value instanceof JsonFloat) {
    const v = toNumberish(value);
    if (!Number.isFinite(v)) invalid(path, `number ${pyStr(value)} is not finite`);
    if (Math.abs(v) > MAX_SAFE) invalid(path, `number ${pyStr(value)} exceeds 2^53-1 in magnitude`);
  } else if (typeof value === 'bigint') {
    if (value > BigInt(MAX_SAFE) || value < -BigInt(MAX_SAFE)) invalid(path, `number ${value} exceeds 2^53-1 in magnitude`);
  } else if (value !== null && typeof value !== 'boolean') {
    invalid(path, `${typeof value} is not a JSON value`);
  }
}
/** The leaf bytes of a record (SPEC §2): JCS of the record less its reserved members. */
export function leafBytes(record) {
  if (!isObject(record)) fail('InvalidRecord', `a record must be a JSON object, got ${jsonTypeName(record)}`);
  walkRecord(record, [], 1);
  const claims = {};
  for (const k of Object.keys(record)) if (!RESERVED.has(k)) claims[k] = record[k];
  const data = utf8(canonicalize(claims));
  if (data.length > MAX_LEAF_BYTES) fail('InvalidRecord', `leaf bytes are ${data.length} bytes long, over the limit of ${MAX_LEAF_BYTES}`);
  return data;
}

// --- RFC 9162 (SPEC §3) ------------------------------------------------------------------

/** RFC 9162 §2.1.1: SHA-256(0x00 || data). Resolves to 32 bytes. */
export async function hashLeaf(data) {
  return (await platform()).sha256(concat(Uint8Array.of(0), data));
}
async function hashChildren(P, left, right) {
  return P.sha256(concat(Uint8Array.of(1), left, right));
}
const bitLength = (n) => (n === 0n ? 0 : n.toString(2).length);
function bitCount(n) { let c = 0; for (const d of n.toString(2)) if (d === '1') c++; return c; }
/** The exact number of hashes of an inclusion path for (index, size). */
export function inclusionPathLength(index, size) {
  const inner = bitLength(BigInt(index) ^ (BigInt(size) - 1n));
  return inner + bitCount(BigInt(index) >> BigInt(inner));
}
function consistencyPathLength(first, second) {
  const height = BigInt(bitLength(first & -first) - 1);
  const index = (first - 1n) >> height;
  const length = inclusionPathLength(index, ((second - 1n) >> height) + 1n);
  return index === 0n ? length : length + 1;
}
function checkIndex(leafIndex, treeSize) {
  if (!isInt(leafIndex)) fail('MalformedProof', `leaf index must be an integer, got ${typeName(leafIndex)}`);
  if (!isInt(treeSize)) fail('MalformedProof', `tree size must be an integer, got ${typeName(treeSize)}`);
  const index = BigInt(leafIndex); const size = BigInt(treeSize);
  if (!(index >= 0n && index < size)) fail('MalformedProof', `leaf index ${index} is outside a tree of size ${size}`);
  return [index, size];
}
function checkHash(value, what) {
  if (!(value instanceof Uint8Array) || value.length !== 32) {
    fail('MalformedProof', `${what} must be 32 bytes, got ${value instanceof Uint8Array ? value.length : typeName(value)}`);
  }
  return value;
}
function checkPath(path, expected, what) {
  if (!Array.isArray(path)) fail('MalformedProof', `${what} must be a sequence of hashes`);
  path.forEach((p, n) => checkHash(p, `${what}[${n}]`));
  if (path.length !== expected) fail('MalformedProof', `${what} has ${path.length} hashes, a valid proof for these sizes has ${expected}`);
  return path;
}
/** RFC 9162 §2.1.3.2: the root an inclusion path calculates (preconditions checked first). */
export async function rootFromInclusionProof(leafHash, leafIndex, treeSize, path, steps = null) {
  const P = await platform();
  const [index, size] = checkIndex(leafIndex, treeSize);
  let r = checkHash(leafHash, 'leaf hash');
  checkPath(path, inclusionPathLength(index, size), 'inclusion path');
  let fn = index; let sn = size - 1n;
  for (const p of path) {
    if (sn === 0n) fail('MalformedProof', 'inclusion path is longer than the tree is high');
    if ((fn & 1n) || fn === sn) {
      r = await hashChildren(P, p, r);
      steps?.push(['left', p, r]);
      if (!(fn & 1n)) while (!(fn & 1n) && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
    } else {
      r = await hashChildren(P, r, p);
      steps?.push(['right', p, r]);
    }
    fn >>= 1n; sn >>= 1n;
  }
  if (sn !== 0n) fail('MalformedProof', 'inclusion path ends below the root (size counter is not zero)');
  return r;
}
/** RFC 9162 inclusion: resolves, or rejects with a VerifyError (kind MalformedProof or RootMismatch). */
export async function verifyInclusion(leafHash, leafIndex, treeSize, path, root) {
  checkIndex(leafIndex, treeSize);
  const expected = checkHash(root, 'root');
  const calculated = await rootFromInclusionProof(leafHash, leafIndex, treeSize, path);
  if (!equalBytes(calculated, expected)) {
    fail('RootMismatch', `inclusion proof of leaf ${leafIndex} in tree size ${treeSize} does not match: expected root ${hex(expected)}, calculated ${hex(calculated)}`);
  }
}
/** The hash steps of an inclusion check, as verify-proof --explain prints them. */
async function explainInclusion(leaf, index, size, path, root, whose) {
  const lines = [`leaf hash = ${hex(leaf)} (leaf_index ${index}, tree_size ${size})`];
  const steps = [];
  let calculated = null; let problem = '';
  try { calculated = await rootFromInclusionProof(leaf, index, size, path, steps); } catch (e) {
    if (!(e instanceof VerifyError)) throw e;
    problem = e.message;
  }
  steps.forEach(([side, p, r], i) => {
    const order = side === 'left' ? `path[${i}] ${hex(p)} || r` : `r || path[${i}] ${hex(p)}`;
    lines.push(`step ${i}: parent = H(0x01 || ${order}) = ${hex(r)}`);
  });
  lines.push(calculated === null ? `no root: ${problem}` : `calculated root = ${hex(calculated)}`);
  lines.push(`expected root   = ${hex(root)} (${whose})`);
  return lines;
}
/** RFC 9162 §2.1.4.2 consistency, with SPEC §3's reading (first = 0 refused; equal sizes: empty path, equal roots). */
export async function verifyConsistency(first, second, firstRoot, secondRoot, path) {
  const P = await platform();
  if (!isInt(first) || !isInt(second)) fail('MalformedProof', 'sizes must be integers');
  const f = BigInt(first); const s = BigInt(second);
  if (!(f > 0n && f <= s)) fail('MalformedProof', `consistency needs 0 < first <= second, got ${f} and ${s}`);
  checkHash(firstRoot, 'first root'); checkHash(secondRoot, 'second root');
  if (f === s) {
    checkPath(path, 0, 'consistency path');
    if (!equalBytes(firstRoot, secondRoot)) fail('RootMismatch', `trees of equal size ${f} have different roots`);
    return;
  }
  checkPath(path, consistencyPathLength(f, s), 'consistency path');
  let proof = path;
  if ((f & (f - 1n)) === 0n) proof = [firstRoot, ...path];
  let fn = f - 1n; let sn = s - 1n;
  while (fn & 1n) { fn >>= 1n; sn >>= 1n; }
  let fr = proof[0]; let sr = proof[0];
  for (const c of proof.slice(1)) {
    if (sn === 0n) fail('MalformedProof', 'consistency path is longer than the tree is high');
    if ((fn & 1n) || fn === sn) {
      fr = await hashChildren(P, c, fr);
      sr = await hashChildren(P, c, sr);
      if (!(fn & 1n)) while (!(fn & 1n) && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
    } else {
      sr = await hashChildren(P, sr, c);
    }
    fn >>= 1n; sn >>= 1n;
  }
  if (sn !== 0n) fail('MalformedProof', 'consistency path ends below the root (size counter is not zero)');
  if (!equalBytes(fr, firstRoot)) fail('RootMismatch', `consistency proof ${f} -> ${s} does not reproduce the first root`);
  if (!equalBytes(sr, secondRoot)) fail('RootMismatch', `consistency proof ${f} -> ${s} does not reproduce the second root`);
}

// --- keys (RFC 7638 kids) and the trusted set ----------------------------------------------

async function thumbprint(x) {
  const P = await platform();
  return b64urlEncode(await P.sha256(utf8(`{"crv":"Ed25519","kty":"OKP","x":"${x}"}`)));
}
function decodeX(x) {
  if (typeof x !== 'string') fail('InvalidKey', `x must be a base64url string, got ${typeName(x)}`);
  let raw;
  try { raw = b64urlDecode(x); } catch (e) { fail('InvalidKey', `x ${pyRepr(x)} is not canonical base64url: ${e.message}`); }
  if (raw.length !== 32) fail('InvalidKey', `x must encode 32 bytes, got ${raw.length}`);
  return raw;
}
async function keyFromJwk(jwk, position, requireThumbprints) {
  const where = `key #${position}`;
  if (!isObject(jwk)) fail('InvalidKey', `${where} is not a JSON object`);
  if (has(jwk, 'd')) fail('InvalidKey', `${where} contains private key material (d); publish public keys only`);
  if (jwk.kty !== 'OKP') fail('InvalidKey', `${where}: kty is ${pyRepr(jwk.kty)}, expected 'OKP'`);
  if (jwk.crv !== 'Ed25519') fail('InvalidKey', `${where}: crv is ${pyRepr(jwk.crv)}, expected 'Ed25519'`);
  if (!has(jwk, 'x')) fail('InvalidKey', `${where}: missing x`);
  let raw;
  try { raw = decodeX(jwk.x); } catch (e) { fail('InvalidKey', `${where}: ${e.message}`); }
  const kid = await thumbprint(jwk.x);
  if (has(jwk, 'use') && jwk.use !== 'sig') fail('InvalidKey', `${where}: use is ${pyRepr(jwk.use)}, expected 'sig'`);
  if (has(jwk, 'alg') && jwk.alg !== 'EdDSA') fail('InvalidKey', `${where}: alg is ${pyRepr(jwk.alg)}, expected 'EdDSA'`);
  if (has(jwk, 'kid') && jwk.kid !== kid) {
    if (requireThumbprints) fail('InvalidKey', `${where}: kid ${pyRepr(jwk.kid)} is not the RFC 7638 thumbprint of x (${kid})`);
    if (typeof jwk.kid !== 'string' || !jwk.kid) fail('InvalidKey', `${where}: kid must be a non-empty string, got ${pyRepr(jwk.kid)}`);
    return { raw, kid: jwk.kid, x: jwk.x, thumbprint: kid };
  }
  return { raw, kid, x: jwk.x, thumbprint: kid };
}
function keySet(keys) {
  const byKid = new Map();
  for (const key of keys) {
    if (byKid.has(key.kid)) {
      if (!equalBytes(byKid.get(key.kid).raw, key.raw)) fail('InvalidKey', `kid ${pyRepr(key.kid)} names two different keys`);
      fail('InvalidKey', `key ${key.kid} is listed twice`);
    }
    byKid.set(key.kid, key);
  }
  if (byKid.size === 0) fail('InvalidKey', 'the key set is empty; it would trust nothing');
  return new Map([...byKid.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)));
}
async function keySetFromJwks(obj, requireThumbprints = false) {
  if (!isObject(obj)) fail('InvalidKey', "a JWK set must be a JSON object with a 'keys' array");
  if (!Array.isArray(obj.keys)) fail('InvalidKey', "a JWK set must have a 'keys' array");
  const keys = [];
  for (let i = 0; i < obj.keys.length; i++) keys.push(await keyFromJwk(obj.keys[i], i, requireThumbprints));
  return keySet(keys);
}
function getKey(keys, kid) {
  const key = typeof kid === 'string' ? keys.get(kid) : undefined;
  if (key === undefined) fail('UnknownKeyError', `kid ${pyRepr(kid)} is not in the trusted key set (trusted: ${[...keys.keys()].join(', ')})`);
  return key;
}
// libsodium's rules (the Python verifier's), which OpenSSL and WebCrypto do not all apply: no
// small-order or non-canonical public key, no small-order R, S below the group order L.
const SMALL_ORDER = [
  '0000000000000000000000000000000000000000000000000000000000000000',
  '0100000000000000000000000000000000000000000000000000000000000000',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
];
const GROUP_ORDER = fromHex('edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010');
function smallOrder(point) {
  const masked = point.slice(0, 32);
  masked[31] &= 0x7f;
  return SMALL_ORDER.includes(hex(masked));
}
function canonicalPoint(point) {
  if ((point[31] & 0x7f) !== 0x7f || point[0] < 0xed) return true;
  for (let i = 1; i < 31; i++) if (point[i] !== 0xff) return true;
  return false;
}
function canonicalScalar(s) {
  for (let i = 31; i >= 0; i--) {
    if (s[i] < GROUP_ORDER[i]) return true;
    if (s[i] > GROUP_ORDER[i]) return false;
  }
  return false;
}
// Signatures of shared evidence (heads, checkpoints, cosignatures) that verified, by key,
// signature and message digest: one checkpoint and its cosignatures serve many records, so a
// page or gateway checks each once. Only successes are kept; record tokens are not.
const REMEMBERED = new Map();
const REMEMBER_MAX = 512;
/** Ed25519 as libsodium checks it; `kid` names the key in the error (a string, or a function). */
async function verifyEd25519(raw, message, signature, kid, remember = false) {
  if (signature.length !== 64) fail('SignatureMismatch', `an Ed25519 signature is 64 bytes, got ${signature.length}`);
  const P = await platform();
  const id = remember ? hex(raw) + hex(signature) + hex(await P.sha256(message)) : null;
  if (id !== null && REMEMBERED.has(id)) return;
  const strict = canonicalScalar(signature.subarray(32)) && !smallOrder(signature.subarray(0, 32)) && canonicalPoint(raw) && !smallOrder(raw);
  const ok = strict && await P.verify(raw, message, signature);
  if (!ok) fail('SignatureMismatch', `Ed25519 signature does not verify with key ${typeof kid === 'function' ? await kid() : kid} (Signature was forged or corrupt)`);
  if (id !== null) {
    if (REMEMBERED.size >= REMEMBER_MAX) REMEMBERED.delete(REMEMBERED.keys().next().value);
    REMEMBERED.set(id, true);
  }
}

// --- compact JWS (RFC 7515, EdDSA/RFC 8037): nine rules in Python's order --------------------

const KNOWN_TYPS = { [HEAD_TYP]: 'a head', [RECORD_TYP]: 'a record token' };
function jwsSegments(token) {
  if (typeof token !== 'string') fail('JWSFormatError', `a compact JWS is a str, got ${typeName(token)}`);
  const nonAscii = token.search(/[^\x00-\x7f]/);
  if (nonAscii >= 0) fail('JWSFormatError', `non-ASCII character ${pyRepr(String.fromCodePoint(token.codePointAt(nonAscii)))} at offset ${nonAscii}`);
  const bad = token.search(/[\x00-\x20\x7f]/);
  if (bad >= 0) fail('JWSFormatError', `whitespace or control character ${pyRepr(token[bad])} ${bad === token.length - 1 ? 'at the end' : `at offset ${bad}`}`);
  const segments = token.split('.');
  if (segments.length !== 3) fail('JWSFormatError', `expected 3 dot-separated segments, found ${segments.length}`);
  ['header', 'payload', 'signature'].forEach((name, i) => { if (!segments[i]) fail('JWSFormatError', `the ${name} segment is empty`); });
  const decoded = segments.map((s, i) => {
    try { return b64urlDecode(s); } catch (e) { return fail('JWSEncodingError', `the ${['header', 'payload', 'signature'][i]} segment: ${e.message}`); }
  });
  const header = loadObject(decoded[0], 'the header', 'JWSEncodingError', '{what} is a JSON {type}, not an object');
  const extra = Object.keys(header).filter((m) => !['alg', 'kid', 'typ'].includes(m)).sort();
  if (extra.length) fail('JWSHeaderError', `header member(s) ${extra.map(pyRepr).join(', ')} not allowed (only alg, kid, typ)`);
  for (const m of ['alg', 'kid', 'typ']) {
    if (!has(header, m)) fail('JWSHeaderError', `header member ${pyRepr(m)} is missing`);
    if (typeof header[m] !== 'string') fail('JWSHeaderError', `header member ${pyRepr(m)} must be a string, found ${jsonTypeName(header[m])}`);
  }
  return { segments, header, payload: decoded[1], signature: decoded[2] };
}
/** The header of a well-formed compact JWS, not verified. */
const unverifiedHeader = (token) => jwsSegments(token).header;
/** Verify a compact JWS with the trusted `keys` (a Map kid -> key) and `typ`; {header, payload, kid}. */
async function verifyJws(token, keys, typ) {
  const { segments, header, payload, signature } = jwsSegments(token);
  if (header.alg !== 'EdDSA') fail('JWSAlgorithmError', `alg is ${pyRepr(header.alg)}; only 'EdDSA' is accepted`);
  if (header.typ !== typ) {
    const found = KNOWN_TYPS[header.typ];
    const hint = found && KNOWN_TYPS[typ] ? ` (${found} was presented where ${KNOWN_TYPS[typ]} was expected)` : '';
    fail('JWSTypeError', `typ is ${pyRepr(header.typ)}, expected ${pyRepr(typ)}${hint}`);
  }
  const key = getKey(keys, header.kid);
  if (signature.length !== 64) fail('SignatureMismatch', `the signature is ${signature.length} bytes; an Ed25519 signature is 64`);
  await verifyEd25519(key.raw, utf8(segments[0] + '.' + segments[1]), signature, key.kid, typ === HEAD_TYP);
  return { header, payload, kid: header.kid };
}
async function verifyClaims(token, keys, typ) {
  const { payload } = await verifyJws(token, keys, typ);
  return loadObject(payload, 'the payload', 'ClaimsError', '{what} is a JSON {type}, not an object');
}

// --- heads (SPEC §4) -------------------------------------------------------------------------

const HEAD_CLAIMS = ['v', 'iss', 'day', 'tree_size', 'root', 'sealed', 'prev', 'iat'];
const HEX64 = /^[0-9a-f]{64}$/;
function hashFromHex(text, what) {
  if (typeof text !== 'string' || !HEX64.test(text)) fail('EncodingError', `${what} must be 64 lowercase hex characters`);
  return fromHex(text);
}
/** Days since 1970-01-01 of a proleptic Gregorian date, or null if it is not a real date. */
function epochDay(y, m, d) {
  const leap = y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  if (y < 1 || m < 1 || m > 12 || d < 1 || d > days[m - 1]) return null;
  const yy = m <= 2 ? y - 1 : y;
  const era = Math.floor(yy / 400);
  const yoe = yy - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  return era * 146097 + yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy - 719468;
}
function parseDay(text) {
  if (typeof text !== 'string' || !/^[0-9]{4}-[0-9]{2}-[0-9]{2}$/.test(text)) fail('EncodingError', `day must be YYYY-MM-DD, got ${pyRepr(text)}`);
  const [y, m, d] = text.split('-').map(Number);
  if (epochDay(y, m, d) === null) fail('EncodingError', `${pyRepr(text)} is not a real date`);
  return text;
}
function exactClaims(claims, names, missing, version) {
  const absent = names.filter((n) => !has(claims, n));
  const extra = Object.keys(claims).filter((n) => !names.includes(n)).sort();
  if (absent.length || extra.length) fail('ClaimsError', `${missing} ${pyRepr(absent)}, unexpected ${pyRepr(extra)}`);
  if (claims.v !== '0.2') fail('ClaimsError', `${version} is ${pyRepr(claims.v)}, expected '0.2'`);
}
function checkHeadClaims(claims) {
  exactClaims(claims, HEAD_CLAIMS, 'head claims: missing', 'head v');
  if (typeof claims.iss !== 'string') fail('ClaimsError', 'head iss must be a string');
  try {
    parseDay(claims.day);
    hashFromHex(claims.root, 'head root');
    if (claims.prev !== null) hashFromHex(claims.prev, 'head prev');
  } catch (e) { fail('ClaimsError', e.message); }
  for (const name of ['tree_size', 'iat']) {
    if (!isInt(claims[name]) || claims[name] < 0) fail('ClaimsError', `head ${name} must be a non-negative integer`);
  }
  if (typeof claims.sealed !== 'boolean') fail('ClaimsError', 'head sealed must be true or false');
  return claims;
}
async function verifyHeadToken(token, keys) {
  return { claims: checkHeadClaims(await verifyClaims(token, keys, HEAD_TYP)), jws: token };
}
const isSpaceByte = (b) => b === 32 || (b >= 9 && b <= 13);
/** Python's bytes.strip(): no ASCII whitespace at either end. */
function stripBytes(data) {
  let a = 0; let b = data.length;
  while (a < b && isSpaceByte(data[a])) a++;
  while (b > a && isSpaceByte(data[b - 1])) b--;
  return data.subarray(a, b);
}
/** A head document or bare compact JWS (bytes), verified; a document's plain claims must equal the signed. */
async function verifiedHead(data, keys) {
  const trimmed = stripBytes(data);
  if (trimmed[0] !== 0x7b) return verifyHeadToken(tokenText(data), keys);
  const doc = loadObject(trimmed, 'head document', 'ClaimsError', 'head document has no `jws` member');
  if (typeof doc.jws !== 'string') fail('ClaimsError', 'head document has no `jws` member');
  const token = doc.jws;
  delete doc.jws;
  checkHeadClaims(doc);
  const head = await verifyHeadToken(token, keys);
  if (!same(doc, head.claims)) fail('VerificationError', "the head document's claims differ from its signed claims");
  return head;
}
/** A compact JWS read from a file: trailing line ends are tolerated (non-ASCII bytes become U+FFFD). */
function tokenText(data) {
  let end = data.length;
  while (end > 0 && (data[end - 1] === 10 || data[end - 1] === 13)) end--;
  let s = '';
  for (let i = 0; i < end; i++) s += data[i] < 128 ? String.fromCharCode(data[i]) : '\ufffd';
  return s;
}
/** Python equality of JSON values: numbers by value, booleans apart from numbers. */
function same(a, b) {
  if (typeof a === 'boolean' || typeof b === 'boolean') return a === b;
  const na = typeof a === 'number' || typeof a === 'bigint' || a instanceof JsonFloat;
  const nb = typeof b === 'number' || typeof b === 'bigint' || b instanceof JsonFloat;
  if (na || nb) return na && nb && numberEquals(toNumberish(a), toNumberish(b));
  if (a === null || b === null || typeof a === 'string' || typeof b === 'string') return a === b;
  if (Array.isArray(a) || Array.isArray(b)) return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a); const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => has(b, k) && same(a[k], b[k]));
  }
  return false;
}
function numberEquals(a, b) {
  if (typeof a === 'bigint' && typeof b === 'bigint') return a === b;
  if (typeof a === 'bigint') return Number.isInteger(b) && a === BigInt(b);
  if (typeof b === 'bigint') return Number.isInteger(a) && b === BigInt(a);
  return a === b;
}

/** The history leaf hash of a head (SPEC §12.1): SHA-256(0x00 || its JWS payload), as hex. */
export async function headLeafHash(head) {
  let token = head;
  if (isObject(head)) token = head.jws;
  else if (typeof head === 'string' && head.trim().startsWith('{')) token = parseJSON(head.trim()).jws;
  if (typeof token !== 'string' || token.split('.').length !== 3) throw new TypeError('not a head document or compact JWS');
  return hex(await hashLeaf(b64urlDecode(token.trim().split('.')[1])));
}

// --- C2SP signed notes, checkpoints, cosignatures (SPEC §12.2-§12.3) --------------------------

const PY_SPACE = /[\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/u;
function checkKeyName(name) {
  if (typeof name !== 'string' || !name) fail('MalformedNote', 'a key name must be a non-empty string');
  for (const ch of name) {
    const c = ch.codePointAt(0);
    if (PY_SPACE.test(ch) || ch === '+' || c < 0x20 || c === 0x7f || (c >= 0xd800 && c <= 0xdfff)) {
      fail('MalformedNote', `key name ${pyRepr(name)} contains ${pyRepr(ch)}`);
    }
  }
  return name;
}
/** The signed-note key ID: SHA-256(name || 0x0A || type || public key)[:4]. */
export async function noteKeyId(name, type, publicKey) {
  checkKeyName(name);
  return (await (await platform()).sha256(concat(utf8(name + '\n'), Uint8Array.of(type), publicKey))).subarray(0, 4);
}
function checkNoteText(text, what) {
  if (LONE_SURROGATE.test(text)) fail('MalformedNote', `${what} must be text that UTF-8 can encode`);
  if (!text.endsWith('\n')) fail('MalformedNote', `${what} must end in a newline`);
  const bad = text.match(/[\x00-\x09\x0b-\x1f]/);
  if (bad) fail('MalformedNote', `${what} contains the control character ${pyRepr(bad[0])}`);
}
/** Parse a C2SP signed note (bytes or text): {text, signatures: [{name, keyId, signature}]}. */
export function parseNote(data) {
  let whole = data;
  if (data instanceof Uint8Array) {
    if (data.length > LIMITS.note) fail('MalformedNote', `a note is at most ${LIMITS.note} bytes`);
    try { whole = strictDecoder.decode(data); } catch { fail('MalformedNote', 'a note must be valid UTF-8'); }
  } else if (typeof data !== 'string') fail('MalformedNote', 'a note is bytes');
  else if (utf8(data).length > LIMITS.note) fail('MalformedNote', `a note is at most ${LIMITS.note} bytes`);
  checkNoteText(whole, 'a signed note');
  const split = whole.lastIndexOf('\n\n');
  if (split < 0) fail('MalformedNote', 'a signed note has a blank line before its signatures');
  const text = whole.slice(0, split + 1);
  const lines = whole.slice(split + 2).split('\n').slice(0, -1);
  if (lines.length > 100) fail('MalformedNote', 'more than 100 signatures');
  const signatures = lines.map((line, i) => {
    const where = `signature line ${i + 1}`;
    if (!line.startsWith(EM_DASH + ' ')) fail('MalformedNote', `${where} does not start with an em dash (U+2014) and a space`);
    const parts = line.slice(2).split(' ');
    if (parts.length !== 2) fail('MalformedNote', `${where} is not '— <key name> <base64 signature>'`);
    try { checkKeyName(parts[0]); } catch (e) { fail('MalformedNote', `${where}: ${e.message}`); }
    const blob = b64Decode(parts[1], `${where}'s signature`);
    if (blob.length < 5) fail('MalformedNote', `${where}: a signature is a 4-byte key ID and at least one byte`);
    return { name: parts[0], keyId: blob.subarray(0, 4), signature: blob.subarray(4) };
  });
  if (!signatures.length) fail('MalformedNote', 'a signed note has at least one signature line');
  return { text, signatures };
}
function parseSize(text, what = 'the tree size') {
  if (!text || !/^[0-9]+$/.test(text)) fail('MalformedNote', `${what} is not an ASCII decimal: ${pyRepr(text.slice(0, 40))}`);
  if (text !== '0' && text.startsWith('0')) fail('MalformedNote', `${what} has a leading zero: ${pyRepr(text.slice(0, 40))}`);
  if (text.length > 20 || BigInt(text) >= 2n ** 64n) fail('MalformedNote', `${what} does not fit in 64 bits: ${pyRepr(text.slice(0, 40))}`);
  const n = BigInt(text);
  return n <= BigInt(MAX_SAFE) ? Number(n) : n;
}
/** Parse a C2SP checkpoint body (the note text): {origin, size, root, extensions}. */
export function parseCheckpoint(text) {
  if (!text.endsWith('\n')) fail('MalformedNote', "a checkpoint's text ends in a newline");
  const lines = text.slice(0, -1).split('\n');
  if (lines.length < 3) fail('MalformedNote', `a checkpoint has at least 3 lines, got ${lines.length}`);
  if (lines.some((l) => !l)) fail('MalformedNote', 'a checkpoint has no empty line');
  const origin = lines[0];
  const size = parseSize(lines[1]);
  const root = b64Decode(lines[2], 'the root hash');
  if (root.length !== 32) fail('MalformedNote', `a checkpoint's root is 32 bytes, got ${root.length}`);
  if (/[\x00-\x1f]/.test(origin)) fail('MalformedNote', "a checkpoint's origin has no control characters");
  return { origin, size, root, extensions: lines.slice(3) };
}
/** Parse a vkey `<name>+<hex key ID>+<base64(type || key)>` strictly (types 0x01 and 0x04). */
export async function parseVkey(text) {
  if (typeof text !== 'string') fail('MalformedVKey', 'a vkey is a string');
  const first = text.indexOf('+'); const second = first < 0 ? -1 : text.indexOf('+', first + 1);
  if (second < 0) fail('MalformedVKey', `a vkey is <name>+<hex key ID>+<base64 key>, got ${pyRepr(text.slice(0, 80))}`);
  const name = text.slice(0, first); const ident = text.slice(first + 1, second); const encoded = text.slice(second + 1);
  let material;
  try { checkKeyName(name); material = b64Decode(encoded, "the vkey's key"); } catch (e) {
    fail('MalformedVKey', `vkey ${pyRepr(text.slice(0, 80))}: ${e.message}`);
  }
  if (!/^[0-9a-f]{8}$/.test(ident)) fail('MalformedVKey', `vkey ${name}: the key ID must be 8 lowercase hex digits`);
  if (material.length < 2) fail('MalformedVKey', `vkey ${name}: no key after the type byte`);
  const type = material[0]; const publicKey = material.subarray(1);
  if (type !== 0x01 && type !== 0x04) fail('MalformedVKey', `vkey ${name}: signature type 0x${HEX[type]} is not supported`);
  if (publicKey.length !== 32) fail('MalformedVKey', `vkey ${name}: an Ed25519 key is 32 bytes, got ${publicKey.length}`);
  const keyId = await noteKeyId(name, type, publicKey);
  if (ident !== hex(keyId)) fail('MalformedVKey', `vkey ${name}: key ID ${ident} is not ${hex(keyId)}`);
  return { name, keyId, type, publicKey };
}
/** A note verifier: {name, keyId, publicKey, cosignature}; cosignature/v1 for witnesses. */
export async function noteVerifier(name, publicKey, cosignature = false) {
  checkKeyName(name);
  return { name, publicKey, cosignature, keyId: await noteKeyId(name, cosignature ? 0x04 : 0x01, publicKey) };
}
function cosignatureTime(signature) {
  if (signature.length !== 72) fail('MalformedNote', `a cosignature/v1 signature is 72 bytes, got ${signature.length}`);
  let t = 0n;
  for (let i = 0; i < 8; i++) t = (t << 8n) | BigInt(signature[i]);
  if (t > 2n ** 63n - 1n) fail('MalformedNote', `a cosignature timestamp is at most 2^63-1, got ${t}`);
  return t <= BigInt(MAX_SAFE) ? Number(t) : t;
}
/** Check one signature of `verifier` over the note text (Ed25519, or cosignature/v1 with its time). */
export async function verifyNoteSignature(verifier, text, signature) {
  const who = `${verifier.name}+${hex(verifier.keyId)}`;
  let message = utf8(text); let sig = signature; let what = 'signature';
  if (verifier.cosignature) {
    let t;
    try { t = cosignatureTime(signature); } catch (e) { fail('NoteSignatureError', `the cosignature by ${who}: ${e.message}`); }
    message = concat(utf8(`cosignature/v1\ntime ${t}\n`), message);
    sig = signature.subarray(8);
    what = 'cosignature';
  }
  try { await verifyEd25519(verifier.publicKey, message, sig, () => thumbprint(b64urlEncode(verifier.publicKey)), true); } catch (e) {
    fail('NoteSignatureError', `the ${what} by ${who} does not verify: ${e.message}`);
  }
}
/** Open a note with known keys: unknown keys are ignored, a known key's bad or repeated signature fails. */
export async function openNote(note, verifiers) {
  const known = new Map();
  for (const v of verifiers) {
    const id = `${v.name}+${hex(v.keyId)}`;
    if (known.has(id)) fail('MalformedVKey', `two known keys are named ${id}`);
    known.set(id, v);
  }
  const verified = [];
  for (const sig of note.signatures) {
    const id = `${sig.name}+${hex(sig.keyId)}`;
    const v = known.get(id);
    if (v === undefined) continue;
    if (verified.some((s) => `${s.name}+${hex(s.keyId)}` === id)) fail('NoteSignatureError', `${id} signed the note twice`);
    await verifyNoteSignature(v, note.text, sig.signature);
    verified.push(sig);
  }
  if (!verified.length) fail('NoteSignatureError', `no signature by a known key (known: ${[...known.keys()].join(', ') || 'none'})`);
  return verified;
}

// --- C2SP tlog-policy and tlog-proof ----------------------------------------------------------

/** Parse a C2SP tlog-policy (text or bytes): {logs, witnesses, groups, quorum}; MalformedPolicy names the line. */
const POLICIES = new Map();
export async function parsePolicy(data) {
  const bytes = typeof data === 'string' ? utf8(data) : data;
  const id = bytes instanceof Uint8Array && bytes.length <= 4096 ? latin1Key(bytes) : null;
  if (id !== null && POLICIES.has(id)) return POLICIES.get(id);
  const policy = await readPolicy(bytes);
  if (id !== null) {
    if (POLICIES.size >= 16) POLICIES.delete(POLICIES.keys().next().value);
    POLICIES.set(id, policy);
  }
  return policy;
}
const latin1Key = (bytes) => { let k = ''; for (let i = 0; i < bytes.length; i++) k += String.fromCharCode(bytes[i]); return k; };
async function readPolicy(bytes) {
  if (!(bytes instanceof Uint8Array)) fail('MalformedPolicy', 'a policy is text');
  if (bytes.length > LIMITS.policy) fail('MalformedPolicy', `a policy file is at most ${LIMITS.policy} bytes`);
  let line = 1;
  for (const b of bytes) {
    if (b === 10) line++;
    else if ((b < 0x20 && b !== 9) || b === 0x7f) fail('MalformedPolicy', `line ${line}: only tab and newline may be control characters`);
  }
  let text;
  try { text = strictDecoder.decode(bytes); } catch { fail('MalformedPolicy', 'a policy file must be UTF-8'); }
  const policy = { logs: [], witnesses: [], groups: [], quorum: null };
  const names = new Set();
  const define = (name) => {
    if (name === 'none') fail('MalformedPolicy', "'none' is predefined and cannot be defined");
    if (names.has(name)) fail('MalformedPolicy', `${pyRepr(name)} is already defined`);
    names.add(name);
  };
  const lines = text.split('\n');
  for (let n = 0; n < lines.length; n++) {
    const items = lines[n].replaceAll('\t', ' ').split(' ').filter(Boolean);
    if (!items.length || items[0].startsWith('#')) continue;
    const args = items.slice(1);
    try {
      if (items[0] === 'log') {
        if (args.length !== 1 && args.length !== 2) fail('MalformedPolicy', "a log line is 'log <vkey> [<url>]'");
        const vkey = await parseVkey(args[0]);
        if (vkey.type !== 0x01) fail('MalformedVKey', `vkey ${vkey.name} is not an Ed25519 note key (type 0x01)`);
        if (policy.logs.some((l) => equalBytes(l.verifier.publicKey, vkey.publicKey))) fail('MalformedPolicy', 'a log with this public key is already listed');
        if (policy.logs.length >= 64) fail('MalformedPolicy', 'more than 64 logs');
        policy.logs.push({ verifier: await noteVerifier(vkey.name, vkey.publicKey), url: args[1] ?? null });
      } else if (items[0] === 'witness') {
        if (args.length !== 2 && args.length !== 3) fail('MalformedPolicy', "a witness line is 'witness <name> <vkey> [<url>]'");
        const vkey = await parseVkey(args[1]);
        if (policy.witnesses.some((w) => equalBytes(w.verifier.publicKey, vkey.publicKey))) fail('MalformedPolicy', 'a witness with this public key is already listed');
        if (policy.witnesses.length >= 256) fail('MalformedPolicy', 'more than 256 witnesses');
        define(args[0]);
        policy.witnesses.push({ name: args[0], verifier: await noteVerifier(vkey.name, vkey.publicKey, true), url: args[2] ?? null });
      } else if (items[0] === 'group') {
        if (args.length < 3) fail('MalformedPolicy', "a group line is 'group <name> <k|all|any> <member>...'");
        const [name, rule, ...members] = args;
        for (const m of members) {
          if (m === 'none') fail('MalformedPolicy', "'none' cannot be a group member");
          if (!names.has(m)) fail('MalformedPolicy', `group ${name}: ${pyRepr(m)} is not defined on an earlier line`);
        }
        if (new Set(members).size !== members.length) fail('MalformedPolicy', `group ${name}: a member is listed twice`);
        let k;
        if (rule === 'all') k = members.length;
        else if (rule === 'any') k = 1;
        else {
          try { k = Number(parseSize(rule, 'a group threshold')); } catch { fail('MalformedPolicy', `a group threshold is all, any or k, got ${pyRepr(rule)}`); }
          if (!(k >= 1 && k <= members.length)) fail('MalformedPolicy', `a group threshold k must be 1 to ${members.length}, got ${rule}`);
        }
        if (policy.groups.length >= 256) fail('MalformedPolicy', 'more than 256 groups');
        define(name);
        policy.groups.push({ name, threshold: k, members });
      } else if (items[0] === 'quorum') {
        if (args.length !== 1) fail('MalformedPolicy', "a quorum line is 'quorum <name>'");
        if (policy.quorum !== null) fail('MalformedPolicy', 'a policy has exactly one quorum line');
        if (args[0] !== 'none' && !names.has(args[0])) fail('MalformedPolicy', `quorum ${pyRepr(args[0])} is not defined on an earlier line`);
        policy.quorum = args[0];
      } else fail('MalformedPolicy', `unknown keyword ${pyRepr(items[0])}`);
    } catch (e) {
      if (e instanceof VerifyError) fail('MalformedPolicy', `policy line ${n + 1}: ${e.message}`);
      throw e;
    }
  }
  if (policy.quorum === null) fail('MalformedPolicy', 'the policy has no quorum line');
  return policy;
}
function witnessed(policy, cosigned) {
  const done = new Map(policy.witnesses.map((w) => [w.name, cosigned.has(w.name)]));
  for (const g of policy.groups) done.set(g.name, g.members.filter((m) => done.get(m)).length >= g.threshold);
  done.set('none', true);
  return done;
}
/** Check a checkpoint note's cosignatures against a policy at `at` (+60 s): {cosigned: Map, failed: Map}. */
export async function checkCosignatures(note, policy, at) {
  const cosigned = new Map(); const failed = new Map();
  for (const w of policy.witnesses) {
    const lines = note.signatures.filter((s) => s.name === w.verifier.name && equalBytes(s.keyId, w.verifier.keyId));
    if (!lines.length) continue;
    if (lines.length > 1) { failed.set(w.name, `${lines.length} lines by one key`); continue; }
    let t;
    try {
      await verifyNoteSignature(w.verifier, note.text, lines[0].signature);
      t = cosignatureTime(lines[0].signature);
    } catch (e) {
      if (!(e instanceof VerifyError)) throw e;
      failed.set(w.name, e.message); continue;
    }
    if (BigInt(t) > BigInt(at) + 60n) { failed.set(w.name, `cosignature time ${t} is more than 60 s after ${at}`); continue; }
    cosigned.set(w.name, t);
  }
  return { cosigned, failed };
}
function requireQuorum(policy, { cosigned, failed }) {
  if (failed.size) fail('NoteSignatureError', `cosignature lines failed: ${[...failed].map(([n, why]) => `${n}: ${why}`).join('; ')}`);
  const done = witnessed(policy, cosigned);
  if (done.get(policy.quorum)) return;
  const group = policy.groups.find((g) => g.name === policy.quorum);
  let why = `no cosignature by ${policy.quorum}`;
  if (group) {
    const missing = group.members.filter((m) => !done.get(m));
    why = `group ${group.name} needs ${group.threshold} of ${group.members.length}, has ${group.members.length - missing.length} (missing ${missing.join(', ')})`;
  }
  fail('QuorumNotMet', `quorum ${policy.quorum} not met: ${why}; cosigned by ${[...cosigned.keys()].sort().join(', ') || 'no known witness'}`);
}
/** Parse a C2SP tlog-proof (bytes or text): {extra, index, path, note, checkpoint}; strict as Python's. */
export function parseTlogProof(data) {
  const bytes = typeof data === 'string' ? utf8(data) : data;
  if (!(bytes instanceof Uint8Array)) fail('MalformedNote', 'a tlog-proof is bytes');
  if (bytes.length > LIMITS.proof) fail('MalformedNote', `a tlog-proof is at most ${LIMITS.proof} bytes`);
  let split = -1;
  for (let i = 0; i + 1 < bytes.length; i++) if (bytes[i] === 10 && bytes[i + 1] === 10) { split = i; break; }
  if (split < 0) fail('MalformedNote', 'a tlog-proof has a blank line before its checkpoint');
  const head = bytes.subarray(0, split);
  if (head.some((b) => b > 127)) fail('MalformedNote', "a tlog-proof's lines before the checkpoint are ASCII");
  const lines = strictDecoder.decode(head).split('\n');
  if (lines[0] !== 'c2sp.org/tlog-proof@v1') fail('MalformedNote', "a tlog-proof starts with the line 'c2sp.org/tlog-proof@v1'");
  let rest = lines.slice(1);
  let extra = null;
  if (rest.length && rest[0].startsWith('extra ')) { extra = b64Decode(rest[0].slice(6), 'the extra data'); rest = rest.slice(1); }
  if (!rest.length || !rest[0].startsWith('index ')) fail('MalformedNote', "a tlog-proof has an 'index <n>' line after the header (and extra)");
  const index = parseSize(rest[0].slice(6), 'the index');
  const path = rest.slice(1).map((line, i) => {
    const digest = b64Decode(line, `inclusion path hash ${i + 1}`);
    if (digest.length !== 32) fail('MalformedNote', `inclusion path hash ${i + 1} is ${digest.length} bytes, not 32`);
    return digest;
  });
  if (extra !== null && !extra.length) fail('MalformedNote', "a tlog-proof's extra, when present, is not empty");
  const note = parseNote(bytes.subarray(split + 2));
  const checkpoint = parseCheckpoint(note.text);
  if (!(BigInt(index) < BigInt(checkpoint.size))) fail('MalformedNote', `index ${index} is not below the checkpoint's size ${checkpoint.size}`);
  const expected = inclusionPathLength(index, checkpoint.size);
  if (path.length !== expected) fail('MalformedNote', `the inclusion path of index ${index} in size ${checkpoint.size} has ${expected} hashes, got ${path.length}`);
  return { extra, index, path, note, checkpoint };
}

// --- key rotation records and revocations (SPEC §13.2; roots/README.md) ----------------------

function exactMembers(claims, names, what) {
  exactClaims(claims, names, `${what}: missing claim(s)`, `${what}: v`);
  if (!isInt(claims.iat) || claims.iat < 0) fail('ClaimsError', `${what}: iat must be a non-negative integer`);
}
async function verifyKeyRecord(token, trusted, iss) {
  const verified = await verifyJws(token, trusted, KEY_TYP);
  const claims = loadObject(verified.payload, 'key record: the payload', 'ClaimsError');
  exactMembers(claims, ['v', 'iss', 'kid', 'jwk', 'iat'], 'key record');
  if (claims.iss !== iss) fail('IssuerMismatch', `key record: iss is ${pyRepr(claims.iss)}, expected ${pyRepr(iss)}`);
  let key;
  try { key = getKey(await keySetFromJwks({ keys: [claims.jwk] }, true), pyStr(claims.kid)); } catch (e) {
    if (!(e instanceof VerifyError)) throw e;
    fail('ClaimsError', `key record: jwk and kid do not name one Ed25519 key: ${e.message}`);
  }
  const published = { kty: 'OKP', crv: 'Ed25519', x: key.x, kid: key.kid, use: 'sig', alg: 'EdDSA' };
  if (!same(claims.jwk, published)) fail('ClaimsError', `key record: jwk of ${key.kid} is not its published form`);
  if (key.kid === verified.kid) fail('ClaimsError', `key record: key ${key.kid} endorses itself`);
  return { signer: verified.kid, key, iat: claims.iat };
}
async function verifyRevocation(token, trusted, iss) {
  const verified = await verifyJws(token, trusted, REVOCATION_TYP);
  const claims = loadObject(verified.payload, 'revocation: the payload', 'ClaimsError');
  exactClaims(claims, ['v', 'iss', 'kid', 'revoked_at', 'iat'], 'revocation: missing claim(s)', 'revocation: v');
  if (claims.iss !== iss) fail('IssuerMismatch', `revocation: iss is ${pyRepr(claims.iss)}, expected ${pyRepr(iss)}`);
  if (typeof claims.kid !== 'string' || !claims.kid) fail('ClaimsError', 'revocation: kid must be a non-empty string');
  for (const n of ['revoked_at', 'iat']) if (!isInt(claims[n]) || claims[n] < 0) fail('ClaimsError', `revocation: ${n} must be a non-negative integer`);
  if (claims.kid === verified.kid) fail('ClaimsError', `revocation: key ${verified.kid} revokes itself`);
  return { signer: verified.kid, kid: claims.kid, revokedAt: claims.revoked_at, iat: claims.iat };
}
const rfc3339 = (t) => new Date(Number(t) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
const describeRevocation = (r) => `key ${r.kid} was revoked at ${rfc3339(r.revokedAt)} (revocation signed by ${r.signer})`;
function voided(revocations, kid, signedAt) {
  const r = revocations.get(kid);
  return r !== undefined && kid === r.kid && BigInt(signedAt) > BigInt(r.revokedAt) ? r : null;
}
function isRevocation(token) {
  try { return unverifiedHeader(token).typ === REVOCATION_TYP; } catch { return false; }
}
/** The closure of the trusted keys over key-records.json, with its revocations (keys/trust.py). */
async function trustClosure(anchors, doc, where) {
  const shape = "key-records.json is not {v: '0.2', iss, records: [JWS]}";
  let parsed;
  try { parsed = loadObject(doc, 'key-records.json', 'ClaimsError', shape); } catch (e) { throw new InputError(`${where}: ${e.message}`); }
  const ks = Object.keys(parsed).sort().join(',');
  if (ks !== 'iss,records,v' || parsed.v !== '0.2' || typeof parsed.iss !== 'string' || !Array.isArray(parsed.records) || !parsed.records.every((r) => typeof r === 'string')) {
    throw new InputError(`${where}: ${shape}`);
  }
  const tokens = parsed.records; const iss = parsed.iss;
  const skipped = new Set();
  for (;;) {
    const found = await follow([...anchors.values()], tokens, iss, skipped);
    const late = [...found.records].filter(([, r]) => voided(found.revocations, r.signer, r.iat) !== null).map(([i]) => i);
    if (!late.length) return found;
    late.forEach((i) => skipped.add(i));
  }
}
async function follow(anchors, tokens, iss, skipped) {
  const trusted = new Map(anchors.map((k) => [k.kid, k]));
  const records = new Map();
  const revoking = tokens.map((t, i) => i).filter((i) => isRevocation(tokens[i]));
  let pending = tokens.map((t, i) => i).filter((i) => !skipped.has(i) && !revoking.includes(i));
  let changed = true;
  while (pending.length && changed) {
    changed = false;
    let keyset = keySet(trusted.values());
    const waiting = [];
    for (const i of pending) {
      let record;
      try { record = await verifyKeyRecord(tokens[i], keyset, iss); } catch (e) {
        if (!(e instanceof VerifyError)) throw e;
        if (e.kind === 'UnknownKeyError') waiting.push(i);
        continue;
      }
      records.set(i, record);
      if (!trusted.has(record.key.kid)) { trusted.set(record.key.kid, record.key); keyset = keySet(trusted.values()); changed = true; }
    }
    pending = waiting;
  }
  const keys = keySet(trusted.values());
  const revocations = new Map();
  for (const i of revoking) {
    let r;
    try { r = await verifyRevocation(tokens[i], keys, iss); } catch (e) { if (!(e instanceof VerifyError)) throw e; continue; }
    if (revocations.has(r.signer)) continue;
    if (!revocations.has(r.kid)) revocations.set(r.kid, r);
  }
  return { keys, records, revocations };
}

// --- bounded reads: every input has a size limit, every URL a deadline ----------------------

export const isUrl = (s) => /^https?:\/\//i.test(s);
/** A local file's bytes (Node only), at most `limit`; null when `ifFound` and it does not exist. */
async function readFile(path, limit, ifFound = false) {
  const { fs } = await platform();
  let fd;
  try { fd = fs.openSync(path, 'r'); } catch (e) {
    if (ifFound && e.code === 'ENOENT') return null;
    throw new InputError(`cannot read ${path}: ${e.code === 'ENOENT' ? 'No such file or directory' : e.message}`);
  }
  try {
    let buffer = new Uint8Array(Math.min(limit, fs.fstatSync(fd).size) + 1);
    let n = 0;
    for (;;) {
      if (n === buffer.length) buffer = concat(buffer, new Uint8Array(Math.min(limit + 1, 2 * n) - n));
      const got = fs.readSync(fd, buffer, n, buffer.length - n, null);
      if (got === 0) break;
      n += got;
      if (n > limit) throw new InputError(`${path}: larger than ${limit} bytes, the limit for this input (read no further)`);
    }
    return buffer.slice(0, n);
  } catch (e) {
    if (e instanceof InputError) throw e;
    throw new InputError(`cannot read ${path}: ${e.code === 'EISDIR' ? 'Is a directory' : e.message}`);
  } finally { fs.closeSync(fd); }
}
/** GET `url`: a 200's body of at most `limit` bytes within `deadlineMs`; 404 is null when `ifFound`.
 * Any other failure throws an Error whose message names the URL. */
export async function fetchBounded(url, { limit, deadlineMs, ifFound = false, fetcher = globalThis.fetch }) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), deadlineMs);
  try {
    let response;
    try { response = await fetcher(url, { signal: controller.signal, redirect: 'follow', cache: 'no-cache' }); } catch (e) {
      throw new InputError(`GET ${url}: ${controller.signal.aborted ? `no answer within the deadline of ${deadlineMs / 1000} s` : e.message}`);
    }
    if (response.status === 404 && ifFound) { controller.abort(); return null; }
    if (response.status !== 200) { controller.abort(); throw new InputError(`GET ${url}: HTTP ${response.status}`); }
    const declared = response.headers.get('content-length');
    if (declared !== null && /^[0-9]+$/.test(declared) && Number(declared) > limit) {
      controller.abort();
      throw new InputError(`GET ${url}: the reply is larger than ${limit} bytes`);
    }
    const chunks = []; let n = 0;
    const reader = response.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        n += value.length;
        if (n > limit) { controller.abort(); throw new InputError(`GET ${url}: the reply is larger than ${limit} bytes`); }
        chunks.push(value);
      }
    } catch (e) {
      if (e instanceof InputError) throw e;
      throw new InputError(`GET ${url}: ${controller.signal.aborted ? `no answer within the deadline of ${deadlineMs / 1000} s` : e.message}`);
    }
    return concat(...chunks);
  } finally { clearTimeout(timer); }
}
const asBytes = (v) => (v instanceof Uint8Array ? v : typeof v === 'string' ? utf8(v) : utf8(JSON.stringify(v)));

/** `options.roots` without its trailing slashes (a root folder `/` becomes '', so a name joins
 * as `/name`), or null. */
const rootsOf = (options) => (options.roots == null ? null : String(options.roots).replace(/\/+$/, ''));

/** A file of `roots`: a folder's, or a URL's. A URL may be an export's folder or a live log's
 * base (SPEC §6, §12.4): where the export's file is absent (404), the same document is read
 * from the log's HTTP API under that base (`api`). */
async function readRoots(read, roots, file, api, limit, ifFound = false) {
  const where = `${roots}/${file}`;
  if (!isUrl(roots)) return { where, data: await read(where, limit, ifFound) };
  const data = await read(where, limit, true);
  if (data !== null) return { where, data };
  return { where: `${roots}/${api}`, data: await read(`${roots}/${api}`, limit, ifFound) };
}

/** Where the head, stamps and tlog-proof come from (Python's CommandLineSources). */
function makeSources(options, read) {
  const roots = rootsOf(options);
  const join = (name) => `${roots}/${name}`;
  const givenHead = options.head != null;
  return {
    namesHead: givenHead,
    checkpoint: options.checkpoint ?? null,
    async head(anchor) {
      if (givenHead) return { data: asBytes(options.head), where: typeof options.headWhere === 'string' ? options.headWhere : 'the given head' };
      if (anchor === null) fail('VerificationError', 'no valid anchor to locate the head by (give --head)');
      if (roots !== null) return readRoots(read, roots, `${anchor.fileStem}.json`, `roots/${anchor.fileStem}`, LIMITS.input);
      return { data: await read(anchor.url, LIMITS.input), where: anchor.url };
    },
    async stamps(day, anchor) {
      if (options.timestamps != null) return { where: 'the given timestamps', listing: asBytes(options.timestamps), tokens: [] };
      if (roots !== null) {
        const found = await readRoots(read, roots, `${day}.timestamps.json`, `roots/${day}/timestamps`, LIMITS.input, true);
        if (found.data !== null) return { where: found.where, listing: found.data, tokens: [] };
        const tsr = join(`${day}.tsr`);
        const token = await read(tsr, LIMITS.input, true);
        return { where: tsr, listing: null, tokens: token === null ? [] : [token] };
      }
      if (anchor === null) return { where: 'nowhere (no anchor and no --roots)', listing: null, tokens: [] };
      const where = `${anchor.url}/timestamps`;
      return { where, listing: await read(where, LIMITS.input), tokens: [] };
    },
    async historyProof(anchor, leafHex) {
      if (options.tlogProof != null) return { where: typeof options.tlogProofWhere === 'string' ? options.tlogProofWhere : 'the given tlog-proof', data: asBytes(options.tlogProof) };
      if (roots !== null) {
        if (anchor === null) return { where: `nowhere in ${roots} (no anchor to name the head by)`, data: null };
        return readRoots(read, roots, `${anchor.fileStem}.tlog-proof`, `history/proof?leaf_hash=${leafHex}`, LIMITS.proof, true);
      }
      if (givenHead) return { where: 'none given (the head came from --head: give --history-proof)', data: null };
      if (anchor === null) return { where: 'nowhere (no anchor)', data: null };
      const where = `${anchor.base}/history/proof?leaf_hash=${leafHex}`;
      const data = await read(where, LIMITS.proof, true);
      return { where: data === null ? `${where} answered 404` : where, data };
    },
  };
}

// --- the record, its anchor and proof (SPEC §5, §9) -------------------------------------------

const ANCHOR_URL = /\/roots\/([0-9]{4}-[0-9]{2}-[0-9]{2})(?:\/([0-9]+))?$/;
function parseAnchor(obj) {
  if (!isObject(obj)) fail('VerificationError', "the record's anchor is missing or not a JSON object");
  let root;
  try { parseDay(obj.day); root = hashFromHex(obj.root, 'anchor root'); } catch (e) { fail('VerificationError', `anchor: ${e.message}`); }
  const url = obj.url;
  const m = typeof url === 'string' ? ANCHOR_URL.exec(url) : null;
  if (m === null) fail('VerificationError', `anchor url ${pyRepr(url)} is not <base>/roots/<day>[/<tree_size>]`);
  const size = m[2] === undefined ? null : (Number.isSafeInteger(Number(m[2])) ? Number(m[2]) : BigInt(m[2]));
  return {
    day: obj.day, root, url, urlDay: m[1], urlSize: size, base: url.slice(0, m.index),
    fileStem: size === null ? m[1] : `${m[1]}/${m[2].replace(/^0+(?=.)/, '')}`,
  };
}
function parseProof(obj) {
  if (!isObject(obj)) fail('VerificationError', "the record's proof is missing or not a JSON object");
  if (obj.type !== 'rfc9162-sha256') fail('VerificationError', `proof type is ${pyRepr(obj.type)}, expected 'rfc9162-sha256'`);
  if (!Array.isArray(obj.path)) fail('VerificationError', 'proof path must be an array of hex hashes');
  const path = obj.path.map((p, i) => { try { return hashFromHex(p, `proof path[${i}]`); } catch (e) { return fail('VerificationError', e.message); } });
  const int = (v, what) => {
    if (!isInt(v) || v < 0) fail('VerificationError', `proof ${what} must be a non-negative integer, got ${pyRepr(v)}`);
    return v;
  };
  return { leafIndex: int(obj.leaf_index, 'leaf_index'), treeSize: int(obj.tree_size, 'tree_size'), path };
}
const RFC3339 = /^([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?([Zz]|([+-])([0-9]{2}):([0-9]{2}))$/;
/** Epoch seconds (possibly fractional, as [int, fraction digits]) of an RFC 3339 date-time, or null. */
function rfc3339Seconds(text, separators = /[Tt ]/) {
  const m = RFC3339.exec(text);
  if (m === null || !separators.test(text[10])) return null;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number);
  const day = epochDay(y, mo, d);
  if (h > 23 || mi > 59 || s > 59 || day === null) return null;
  let offset = 0;
  if (m[9] !== undefined) {
    const oh = Number(m[10]); const om = Number(m[11]);
    if (oh > 23 || om > 59) return null;
    offset = (m[9] === '-' ? -1 : 1) * (oh * 3600 + om * 60);
  }
  const whole = day * 86400 + h * 3600 + mi * 60 + s - offset;
  return { whole, fraction: m[7] === undefined ? '' : m[7].slice(1) };
}
/** `--at`: epoch seconds, or an RFC 3339 date-time with a zone; null if neither. */
export function parseAt(text) {
  const value = String(text).trim();
  if (/^-?[0-9]+$/.test(value)) return Number.isSafeInteger(Number(value)) ? Number(value) : BigInt(value);
  const t = rfc3339Seconds(value);
  if (t === null) return null;
  return t.whole < 0 && /[1-9]/.test(t.fraction) ? t.whole + 1 : t.whole;
}
function differences(plain, signed) {
  const out = [];
  const members = {};
  for (const k of Object.keys(plain)) if (k !== 'jws') members[k] = plain[k];
  if (has(members, 'expires') && !has(signed, 'expires')) {
    const value = members.expires;
    delete members.expires;
    const exp = signed.exp;
    let problem = null;
    if (!isInt(exp)) problem = 'expires (no integer exp is signed)';
    else if (typeof value !== 'string' || !RFC3339.test(value) || !/[Tt]/.test(value[10])) problem = 'expires (not an RFC 3339 date-time with a zone)';
    else {
      const t = rfc3339Seconds(value, /[Tt]/);
      if (t === null) problem = 'expires (not a real date-time)';
      else if (/[1-9]/.test(t.fraction) || BigInt(t.whole) !== BigInt(exp)) problem = 'expires (not the signed exp)';
    }
    if (problem !== null) out.push(problem);
  }
  const diff = (a, b, where) => {
    if (same(a, b)) return;
    if (isObject(a) && isObject(b)) {
      for (const name of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
        const path = where ? `${where}.${name}` : name;
        if (!has(b, name)) out.push(`${path} (not signed)`);
        else if (!has(a, name)) out.push(`${path} (signed, missing beside jws)`);
        else diff(a[name], b[name], path);
      }
    } else if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
      a.forEach((x, i) => diff(x, b[i], `${where}[${i}]`));
    } else out.push(where);
  };
  diff(members, signed, '');
  if (out.length > 20) out.splice(20, out.length - 20, `and ${out.length - 20} more`);
  return out;
}
function checkLifetime(claims, at) {
  const int = (name) => {
    if (!has(claims, name)) fail('ClaimsError', `required claim ${pyRepr(name)} is missing`);
    const v = claims[name];
    if (!isInt(v)) fail('ClaimsError', `claim ${pyRepr(name)} must be an integer number of seconds, found ${typeName(v)} ${pyRepr(v)}`);
    return BigInt(v);
  };
  const iat = int('iat'); const exp = int('exp'); const now = BigInt(at);
  const lifetime = exp - iat;
  if (lifetime > BigInt(MAX_RECORD_LIFETIME)) fail('TokenLifetimeError', `lifetime exp - iat is ${lifetime} s, more than the ${MAX_RECORD_LIFETIME} s allowed`);
  if (lifetime < 0n) fail('TokenLifetimeError', `exp ${exp} is before iat ${iat}`);
  if (exp < now - BigInt(CLOCK_SKEW)) fail('TokenExpired', `exp ${exp} is ${now - exp} s before ${now}, more than the ${CLOCK_SKEW} s skew allowed`);
  if (iat > now + BigInt(CLOCK_SKEW)) fail('TokenNotYetValid', `iat ${iat} is ${iat - now} s after ${now}, more than the ${CLOCK_SKEW} s skew allowed`);
}
function headMismatches(h, anchor, proof, claims, iss) {
  const p = [];
  const c = h.claims;
  if (c.day !== anchor.day) p.push(`head day ${c.day} != anchor day ${anchor.day}`);
  if (anchor.urlDay !== anchor.day) p.push(`anchor url day ${anchor.urlDay} != anchor day ${anchor.day}`);
  if (c.root !== hex(anchor.root)) p.push(`head root ${c.root} != anchor root ${hex(anchor.root)}`);
  if (!numberEquals(c.tree_size, proof.treeSize)) p.push(`head tree_size ${c.tree_size} != proof tree_size ${proof.treeSize}`);
  if (anchor.urlSize === null && !c.sealed) p.push(`anchor url ${anchor.url} names a sealed head; this head is unsealed`);
  if (anchor.urlSize !== null && c.sealed) p.push(`anchor url ${anchor.url} names an unsealed head; this head is sealed`);
  if (anchor.urlSize !== null && !numberEquals(anchor.urlSize, c.tree_size)) p.push(`anchor url size ${anchor.urlSize} != head tree_size ${c.tree_size}`);
  if (has(claims, 'iss') && !same(claims.iss, c.iss)) p.push(`record iss ${pyRepr(claims.iss)} != head iss ${pyRepr(c.iss)}`);
  if (iss != null && c.iss !== iss) p.push(`head iss ${pyRepr(c.iss)} != --iss ${pyRepr(iss)}`);
  if (iss != null && has(claims, 'iss') && !same(claims.iss, iss)) p.push(`record iss ${pyRepr(claims.iss)} != --iss ${pyRepr(iss)}`);
  return p;
}
/** SPEC §12.2: a public URL's origin (no scheme, no trailing slash, plus /history). */
function originFromUrl(url) {
  const m = /^(https?):\/\/([^/?#]*)([^?#]*)$/i.exec(url);
  const host = m === null ? '' : m[2].replace(/^.*@/, '').replace(/:[0-9]*$/, '');
  if (m === null || !host || m[2].includes('@') || url.endsWith('?') || url.endsWith('#')) {
    fail('UsageError', `a public URL is http(s)://host[:port][/path], got ${pyRepr(url)}`);
  }
  const origin = `${m[2]}${m[3].replace(/\/+$/, '')}/history`;
  try { return checkKeyName(origin); } catch (e) { return fail('UsageError', `public URL ${pyRepr(url)} gives no valid origin: ${e.message}`); }
}

// --- the nine checks -------------------------------------------------------------------------

const check = (name, status, detail) => ({ name, status, detail });
const errorText = (e) => `${e.kind ?? e.name}: ${e.message}`;
function rethrowUnless(e, ...kinds) {
  if (!(e instanceof VerifyError)) throw e;
  if (kinds.length && !kinds.some((k) => k === e.kind || (k === 'NoteError' && NOTE_ERRORS.has(e.kind)))) throw e;
}
const UNSIGNED = 'the record is unsigned (no jws member): nothing vouches for its members beyond the inclusion proof, which covers only its leaf members (all but iat, exp, anchor, proof, expires)';

/** RECORD as Python's read_record reads it: {token, plain} or {unsigned}; InputError if unreadable. */
function readRecord(record) {
  if (isObject(record)) return readObject(record);
  const bytes = typeof record === 'string' ? utf8(record) : record;
  if (!(bytes instanceof Uint8Array)) throw new InputError('RECORD is not a JSON object, JSON text or a compact JWS');
  const text = stripBytes(bytes);
  if (!text.length) throw new InputError('RECORD is empty');
  if (!(text[0] === 0x7b || text[0] === 0x5b || text[0] === 0x22 || (text[0] === 0xef && text[1] === 0xbb && text[2] === 0xbf))) {
    return { token: tokenText(bytes) };
  }
  let obj;
  try { obj = loadObject(text, 'RECORD', 'InputError'); } catch (e) { throw new InputError(e.message); }
  return readObject(obj);
}
function readObject(obj) {
  if (has(obj, 'jws')) {
    if (typeof obj.jws !== 'string') throw new InputError("RECORD's jws member is not a string");
    return { token: obj.jws, plain: obj };
  }
  if (!isObject(obj.anchor) || !isObject(obj.proof)) throw new InputError('RECORD carries no anchor and proof objects');
  return { token: null, unsigned: obj };
}
function notRevoked(c, token, claims, revocations) {
  if (!revocations.size || c.status !== 'PASS') return c;
  const iat = isInt(claims.iat) ? claims.iat : 0;
  const gone = voided(revocations, unverifiedHeader(token).kid, iat);
  return gone === null ? c : check(c.name, 'FAIL', `signed at iat ${pyStr(claims.iat)}, after its key's revocation: ${describeRevocation(gone)}`);
}

async function checkHistory(head, anchor, sources, keys, policy, origin) {
  let explain = [];
  const result = (status, detail, checkpoint = null) => ({ check: check('history', status, detail), checkpoint, explain });
  if (head === null) return result('SKIP', 'no verified head (check 5)');
  const payload = b64urlDecode(head.jws.split('.')[1]);
  const leaf = await hashLeaf(payload);
  const found = await sources.historyProof(anchor, hex(leaf));
  if (found.data === null) {
    if (policy === null) return result('SKIP', `no tlog-proof of the head: ${found.where}`);
    return result('FAIL', `--policy is given but there is no tlog-proof of the head: ${found.where}`);
  }
  let proof; let note; let checkpoint;
  try {
    proof = parseTlogProof(found.data);
    note = proof.note;
    checkpoint = proof.checkpoint;
    if (sources.checkpoint != null) {
      const given = parseNote(asBytes(sources.checkpoint));
      if (given.text !== note.text) fail('MalformedNote', `the given checkpoint is not the tlog-proof's (${note.text.split('\n', 2).join(' ')})`);
      note = given;
    }
  } catch (e) { rethrowUnless(e, 'NoteError'); return result('FAIL', `${found.where} is not a tlog-proof: ${e.message}`); }
  explain = await explainInclusion(leaf, proof.index, checkpoint.size, proof.path, checkpoint.root, `the checkpoint's, ${checkpoint.origin} ${checkpoint.size}`);
  const problem = await extraProblem(proof, payload, keys);
  if (problem) return result('FAIL', `${found.where}: ${problem}`);
  let signers;
  try { signers = await openCheckpoint(note, checkpoint.origin, keys, policy, origin, anchor); } catch (e) {
    rethrowUnless(e, 'NoteError', 'UsageError');
    return result('FAIL', `${found.where}: the checkpoint: ${e.message}`);
  }
  const where = `tlog-proof from ${found.where}`;
  try { await verifyInclusion(leaf, proof.index, checkpoint.size, proof.path, checkpoint.root); } catch (e) {
    rethrowUnless(e);
    return result('FAIL', `${where}: the history inclusion: ${errorText(e)}`, note);
  }
  return result('PASS', `${where}: the head is history leaf ${proof.index} of size ${checkpoint.size}; ${proof.path.length} path hashes reach the root of checkpoint ${checkpoint.origin} ${checkpoint.size} signed by ${signers}`, note);
}
function summary(payload) {
  try {
    const c = parseJSON(payload);
    if (!isObject(c) || !has(c, 'day') || !has(c, 'tree_size') || !has(c, 'sealed')) return 'unreadable claims';
    return `day ${pyStr(c.day)} tree_size ${pyStr(c.tree_size)} sealed ${pyStr(c.sealed)}`;
  } catch { return 'unreadable claims'; }
}
async function extraProblem(proof, payload, keys) {
  if (proof.extra === null) return "it has no extra (the head's compact JWS)";
  if (proof.extra.some((b) => b > 127)) return 'its extra is not an ASCII compact JWS';
  let got;
  try { got = await verifyJws(strictDecoder.decode(proof.extra), keys, HEAD_TYP); } catch (e) {
    rethrowUnless(e);
    return `its extra is not a head JWS by a trusted key: ${errorText(e)}`;
  }
  if (!equalBytes(got.payload, payload)) {
    return `its extra is another head (${summary(got.payload)}) than the anchor's (${summary(payload)}): the proof is not for this head`;
  }
  return '';
}
async function openCheckpoint(note, name, keys, policy, origin, anchor) {
  let origins; let why;
  if (origin != null) { origins = [origin]; why = '--origin'; }
  else if (policy !== null && policy.logs.length) { origins = policy.logs.map((l) => l.verifier.name); why = "the policy's log line"; }
  else if (anchor === null) fail('UsageError', 'no expected origin: no anchor to derive it from (give --origin)');
  else { origins = [originFromUrl(anchor.base)]; why = `the anchor's base ${anchor.base}`; }
  if (!origins.includes(name)) fail('MalformedNote', `its origin is ${pyRepr(name)}, not ${origins.map(pyRepr).join(' or ')} (from ${why})`);
  const verifiers = new Map();
  for (const key of keys.values()) {
    const v = await noteVerifier(name, key.raw);
    verifiers.set(`${v.name}+${hex(v.keyId)}`, v);
  }
  for (const log of policy === null ? [] : policy.logs) if (log.verifier.name === name) verifiers.set(`${name}+${hex(log.verifier.keyId)}`, log.verifier);
  const verified = await openNote(note, verifiers.values());
  return verified.map((s) => `${s.name}+${hex(s.keyId)}`).join(', ');
}
async function checkWitnesses(note, policy, at, history) {
  if (policy === null) return check('witnesses', 'SKIP', 'no --policy given');
  if (note === null) return check('witnesses', 'FAIL', `no checkpoint signed by the log to check (history ${history.status})`);
  const which = 'checkpoint ' + note.text.split('\n').slice(0, 2).join(' ');
  const w = await checkCosignatures(note, policy, at);
  try { requireQuorum(policy, w); } catch (e) { rethrowUnless(e, 'NoteError'); return check('witnesses', 'FAIL', `${which}: ${e.message}`); }
  const names = [...w.cosigned].map(([n, t]) => `${n} (time ${t})`);
  return check('witnesses', 'PASS', `${which}: quorum ${policy.quorum} met at ${at}: cosigned by ${names.length ? names.join(', ') : 'no policy witness'}`);
}
async function checkpointNotRevoked(c, note, head, keys, revocations) {
  if (!revocations.size || c.status !== 'PASS' || note === null || head === null) return c;
  const iat = isInt(head.claims.iat) ? head.claims.iat : 0;
  const gone = [...revocations.values()].filter((r) => BigInt(iat) > BigInt(r.revokedAt));
  if (!gone.length) return c;
  const revoked = new Set(gone.map((r) => r.kid));
  const name = parseCheckpoint(note.text).origin;
  const live = new Set();
  for (const k of keys.values()) if (!revoked.has(k.kid)) live.add(hex(await noteKeyId(name, 1, k.raw)));
  if (note.signatures.some((s) => s.name === name && live.has(hex(s.keyId)))) return c;
  return check(c.name, 'FAIL', `the checkpoint proving a head signed at iat ${pyStr(head.claims.iat)} carries no signature by a key that is not revoked: ${gone.map(describeRevocation).join('; ')}`);
}
/** One DER TLV at `at`: {tag, start, end, next}; throws on anything malformed. */
function der(bytes, at) {
  if (at + 2 > bytes.length) throw new Error('truncated DER');
  const tag = bytes[at];
  let len = bytes[at + 1]; let start = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n < 1 || n > 4 || start + n > bytes.length) throw new Error('bad DER length');
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + bytes[start + i];
    start += n;
  }
  if (start + len > bytes.length) throw new Error('truncated DER');
  return { tag, start, end: start + len, next: start + len };
}
function derChildren(bytes, node) {
  const out = [];
  for (let at = node.start; at < node.end;) { const c = der(bytes, at); out.push(c); at = c.next; }
  return out;
}
const SHA256_OID = '608648016503040201';
/** The SHA-256 message imprint of an RFC 3161 reply (TimeStampResp) or token, or null. */
function stampImprint(bytes) {
  try {
    let node = der(bytes, 0);
    let kids = derChildren(bytes, node);
    if (kids[0].tag === 0x30 && kids.length === 2 && kids[1].tag === 0x30) { node = kids[1]; kids = derChildren(bytes, node); }
    const signedData = derChildren(bytes, derChildren(bytes, kids[1])[0]);
    const encap = derChildren(bytes, signedData[2]);
    const octets = derChildren(bytes, encap[1])[0];
    const tst = derChildren(bytes, der(bytes, octets.start));
    const [alg, hashed] = derChildren(bytes, tst[2]);
    const oid = derChildren(bytes, alg)[0];
    if (hex(bytes.subarray(oid.start, oid.end)) !== SHA256_OID) return null;
    return bytes.subarray(hashed.start, hashed.end);
  } catch { return null; }
}
async function checkTimestamp(head, anchor, sources, tsaCa) {
  if (!tsaCa) return check('timestamp', 'SKIP', 'no --tsa-ca given');
  if (head === null) return check('timestamp', 'SKIP', 'no verified head to check stamps of');
  if (!head.claims.sealed) return check('timestamp', 'SKIP', 'unsealed heads are never stamped');
  const day = head.claims.day;
  const source = await sources.stamps(day, anchor);
  let tokens = source.tokens;
  if (source.listing !== null) {
    try {
      const doc = parseJSON(source.listing);
      if (!isObject(doc)) throw new Error('not an object');
      if (doc.day !== day) throw new Error(`it lists the stamps of ${pyRepr(doc.day ?? null)}`);
      if (!Array.isArray(doc.timestamps)) throw new Error('no timestamps array');
      tokens = doc.timestamps.map((t) => {
        if (!isObject(t) || typeof t.token !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(t.token) || t.token.length % 4) throw new Error('a token is not base64');
        return decode64(t.token.replace(/=+$/, ''), REV64);
      });
    } catch (e) { return check('timestamp', 'FAIL', `${source.where} is not a timestamps document: ${e.message}`); }
  }
  if (!tokens.length) return check('timestamp', 'SKIP', `no stamp of ${day} in ${source.where}`);
  const digest = await (await platform()).sha256(utf8(head.jws));
  const n = tokens.findIndex((t) => { const i = stampImprint(t); return i !== null && equalBytes(i, digest); });
  if (n < 0) return check('timestamp', 'FAIL', `no stamp from ${source.where} verifies: none has the SHA-256 of this head's JWS as its message imprint`);
  return check('timestamp', 'SKIP', `stamp ${n} of ${tokens.length} from ${source.where} has the SHA-256 of the head's JWS as its imprint; its CMS signature and TSA chain are not checked in JavaScript (use verify-proof or openssl ts -verify)`);
}

// --- verification ----------------------------------------------------------------------------

/** `read(where, limit, ifFound)` for `options` (its `fetch` limits): a file path in Node, else a
 * URL; bytes, or null when `ifFound` and absent. The CLI reads its arguments with it too. */
export function reader(options) {
  const limits = options.fetch ?? {};
  const deadlineMs = limits.deadlineMs ?? LIMITS.deadlineMs;
  return (where, limit, ifFound = false) => {
    const max = Math.min(limit, limits.limit ?? limit);
    if (IS_NODE && !isUrl(where)) return readFile(where, max, ifFound);
    return fetchBounded(where, { limit: max, deadlineMs, ifFound, fetcher: limits.fetch ?? globalThis.fetch });
  };
}
async function loadKeys(options, read) {
  let data = options.keys; let where = options.keysWhere ?? 'the given keys';
  if (data == null) {
    if (options.roots == null) throw new InputError('no trusted keys: give --keys FILE|URL or --roots DIR (keys.json)');
    ({ where, data } = await readRoots(read, rootsOf(options), 'keys.json', 'keys', LIMITS.input));
  }
  let keys;
  try {
    let obj = data;
    if (typeof data === 'string' || data instanceof Uint8Array) {
      try { obj = parseJSON(data); } catch (e) { fail('MalformedKeySet', `JWK set is not valid JSON: ${e.message}`); }
    }
    keys = await keySetFromJwks(obj);
  } catch (e) { rethrowUnless(e); throw new InputError(`${where}: ${e.message}`); }
  let records = options.keyRecords ?? null; let recordsWhere = 'the given key records';
  if (records === null && options.roots != null) {
    ({ where: recordsWhere, data: records } = await readRoots(read, rootsOf(options), 'key-records.json', 'keys/records', LIMITS.input, true));
  }
  if (records === null) return { keys, anchors: keys, revocations: new Map(), where };
  const chain = await trustClosure(keys, asBytes(records), recordsWhere);
  return { keys: chain.keys, anchors: keys, revocations: chain.revocations, where };
}

/**
 * Verify a resolver-2 record as verify-proof does (SPEC §9, §12.5): resolves to {ok, checks}
 * with the nine checks of CHECKS in order, or, where verify-proof exits 2 (an input that cannot
 * be read: no trusted keys, a missing file, malformed JSON in the record or keys, a malformed
 * policy), to {ok: false, checks: [], error}. It never rejects.
 * record: an object, JSON text, bytes, or a compact JWS record token.
 * options: keys (JWKS object or text), roots (folder in Node, or URL), head, tlogProof,
 * checkpoint, policy (text), at (unix seconds), origin, iss, tsaCa, keyRecords, timestamps,
 * fetch {limit, deadlineMs, fetch}. See docs/how-to/verify-in-javascript.md.
 */
export async function verifyRecord(record, options = {}) {
  try {
    return await run(record, options ?? {});
  } catch (e) {
    if (e instanceof InputError) return { ok: false, checks: [], error: e.message };
    return { ok: false, checks: [], error: `internal error: ${e && e.stack ? e.stack : e}` };
  }
}

async function run(record, options) {
  await platform();
  const read = reader(options);
  let now = options.at ?? Math.floor(Date.now() / 1000);
  if (typeof now === 'string') now = parseAt(now);
  if (!isInt(now)) throw new InputError(`at must be integer epoch seconds, got ${pyRepr(options.at)}`);
  const trust = await loadKeys(options, read);
  const keys = trust.keys; const revocations = trust.revocations;
  // CR §8: a kid SHOULD be the key's thumbprint; say which trusted keys are named otherwise.
  const notices = [...trust.anchors.values()].filter((k) => k.kid !== k.thumbprint).map((k) => (
    `${trust.where}: trusted key kid ${pyRepr(k.kid)} is not its RFC 7638 thumbprint (${k.thumbprint}); tokens are matched to it by that kid`));
  let policy = null;
  if (options.policy != null) {
    try { policy = await parsePolicy(options.policy); } catch (e) { rethrowUnless(e); throw new InputError(`${options.policyWhere ?? 'the policy'}: ${e.message}`); }
  }
  let origin = options.origin ?? null;
  if (origin !== null) {
    try { origin = checkKeyName(origin); } catch (e) { throw new InputError(`--origin: ${e.message}`); }
  }
  const sources = makeSources(options, read);
  const given = readRecord(record);

  // 1. record_signature
  let claims = null; let signature;
  if (given.token === null) {
    claims = given.unsigned;
    signature = check('record_signature', 'SKIP', UNSIGNED);
  } else {
    try {
      claims = await verifyClaims(given.token, keys, RECORD_TYP);
      const signed = `EdDSA signature by a trusted kid, typ ${RECORD_TYP}`;
      const different = given.plain === undefined ? [] : differences(given.plain, claims);
      if (given.plain === undefined) signature = check('record_signature', 'PASS', signed);
      else if (different.length) signature = check('record_signature', 'FAIL', `${signed}, but the record's plain members differ from its signed claims: ${different.join(', ')}`);
      else signature = check('record_signature', 'PASS', `${signed}; the plain members equal the signed claims`);
      signature = notRevoked(signature, given.token, claims, revocations);
    } catch (e) { rethrowUnless(e); claims = null; signature = check('record_signature', 'FAIL', errorText(e)); }
  }
  // 2. record_lifetime
  let lifetime;
  if (given.token === null) lifetime = check('record_lifetime', 'SKIP', 'the record is unsigned');
  else if (claims === null) lifetime = check('record_lifetime', 'SKIP', 'the record token did not verify');
  else {
    try {
      checkLifetime(claims, now);
      lifetime = check('record_lifetime', 'PASS', `iat ${claims.iat}, exp ${claims.exp} valid at ${now} (lifetime ≤ ${MAX_RECORD_LIFETIME} s, skew ${CLOCK_SKEW} s)`);
    } catch (e) { rethrowUnless(e); lifetime = check('record_lifetime', 'FAIL', errorText(e)); }
  }
  // 3. leaf
  let leaf = null; let leafCheck;
  if (claims === null) leafCheck = check('leaf', 'SKIP', 'no verified record claims');
  else {
    try {
      leaf = await hashLeaf(leafBytes(claims));
      leafCheck = check('leaf', 'PASS', `leaf hash ${hex(leaf)} from the claims (SPEC §2)`);
    } catch (e) { rethrowUnless(e); leafCheck = check('leaf', 'FAIL', `the claims are not a valid record: ${e.message}`); }
  }
  // 4. inclusion
  let anchor = null; let proof = null; let treeError = '';
  if (claims !== null) {
    let anchorError = ''; let proofError = '';
    try { anchor = parseAnchor(claims.anchor); } catch (e) { rethrowUnless(e); anchorError = e.message; }
    try { proof = parseProof(claims.proof); } catch (e) { rethrowUnless(e); proofError = e.message; }
    treeError = anchorError || proofError;
  }
  let inclusion; let explain = [];
  if (claims === null) inclusion = check('inclusion', 'SKIP', 'no verified record claims');
  else if (anchor === null || proof === null) inclusion = check('inclusion', 'FAIL', treeError);
  else if (leaf === null) inclusion = check('inclusion', 'SKIP', 'no leaf hash');
  else {
    explain = await explainInclusion(leaf, proof.leafIndex, proof.treeSize, proof.path, anchor.root, "the anchor's");
    try {
      await verifyInclusion(leaf, proof.leafIndex, proof.treeSize, proof.path, anchor.root);
      inclusion = check('inclusion', 'PASS', `leaf ${proof.leafIndex} of tree size ${proof.treeSize} with ${proof.path.length} path hashes reaches the anchor root ${hex(anchor.root)}`);
    } catch (e) { rethrowUnless(e); inclusion = check('inclusion', 'FAIL', errorText(e)); }
  }
  // 5. head_signature
  let head = null; let headCheck;
  if (claims === null && !sources.namesHead) headCheck = check('head_signature', 'SKIP', 'no verified anchor to locate the head by');
  else {
    let found = null;
    try { found = await sources.head(anchor); } catch (e) { rethrowUnless(e); headCheck = check('head_signature', 'FAIL', `cannot locate the head: ${e.message}`); }
    if (found !== null) {
      try {
        head = await verifiedHead(found.data, keys);
        headCheck = check('head_signature', 'PASS', `head from ${found.where}: EdDSA signature by a trusted kid, typ ${HEAD_TYP}`);
        headCheck = notRevoked(headCheck, head.jws, head.claims, revocations);
      } catch (e) { rethrowUnless(e); headCheck = check('head_signature', 'FAIL', `head from ${found.where}: ${e.message}`); }
    }
  }
  // 6. head_matches
  let matches;
  if (head === null) matches = check('head_matches', 'SKIP', 'no verified head');
  else if (claims === null) matches = check('head_matches', 'SKIP', 'no verified record claims');
  else if (anchor === null || proof === null) matches = check('head_matches', 'FAIL', treeError);
  else {
    const problems = headMismatches(head, anchor, proof, claims, options.iss ?? null);
    const c = head.claims;
    matches = problems.length
      ? check('head_matches', 'FAIL', problems.join('; '))
      : check('head_matches', 'PASS', `head and anchor/proof/record agree: day ${c.day}, tree_size ${c.tree_size}, root ${c.root}, sealed ${c.sealed}, iss ${c.iss}`);
  }
  // 7. timestamp
  const stamp = await checkTimestamp(head, anchor, sources, options.tsaCa);
  // 8. history
  const history = await checkHistory(head, anchor, sources, keys, policy, origin);
  const historyCheck = await checkpointNotRevoked(history.check, history.checkpoint, head, keys, revocations);
  // 9. witnesses
  const witnesses = await checkWitnesses(history.checkpoint, policy, now, history.check);
  const checks = [signature, lifetime, leafCheck, inclusion, headCheck, matches, stamp, historyCheck, witnesses];
  return { ok: checks.every((c) => c.status !== 'FAIL'), checks, explain: { inclusion: explain, history: history.explain }, notices };
}
