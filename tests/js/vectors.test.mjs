// Known answers in JavaScript: the RFC 9162 vectors of tests/vectors/rfc9162.json (as
// tests/unit/test_merkle_vectors.py reads them), the C2SP signed-note vectors of golang.org/x/mod
// (tests/vectors/signed-note.json) and transparency-dev's witness vectors (monkeys.json).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  hashLeaf, hex, rootFromInclusionProof, verifyInclusion, verifyConsistency, inclusionPathLength,
  parseNote, parseVkey, noteVerifier, openNote, parseCheckpoint, parseTlogProof, parsePolicy, checkCosignatures,
} from '../../src/verify-js/verify.mjs';

const here = new URL('../vectors/', import.meta.url);
const load = (name) => JSON.parse(readFileSync(new URL(name, here), 'utf8'));
const fromHex = (h) => Uint8Array.from(Buffer.from(h, 'hex'));
const rfc = load('rfc9162.json');

test('RFC 9162: leaf hashes', async () => {
  for (const tree of rfc.trees) {
    for (let i = 0; i < tree.leaf_inputs.length; i++) {
      assert.equal(hex(await hashLeaf(fromHex(tree.leaf_inputs[i]))), tree.leaf_hashes[i]);
    }
  }
});

test('RFC 9162: every inclusion vector reaches its root', async () => {
  let n = 0;
  for (const tree of rfc.trees) {
    for (const v of tree.inclusion) {
      const leaf = fromHex(tree.leaf_hashes[v.leaf_index]);
      const path = v.path.map(fromHex);
      assert.equal(hex(await rootFromInclusionProof(leaf, v.leaf_index, v.tree_size, path)), tree.roots[String(v.tree_size)]);
      await verifyInclusion(leaf, v.leaf_index, v.tree_size, path, fromHex(tree.roots[String(v.tree_size)]));
      assert.equal(inclusionPathLength(v.leaf_index, v.tree_size), path.length);
      n++;
    }
  }
  assert.ok(n > 10);
});

test('RFC 9162: every consistency vector verifies', async () => {
  for (const tree of rfc.trees) {
    for (const v of tree.consistency) {
      await verifyConsistency(v.first, v.second, fromHex(tree.roots[String(v.first)]), fromHex(tree.roots[String(v.second)]), v.path.map(fromHex));
    }
  }
});

test('RFC 9162: every invalid vector is refused', async () => {
  for (const v of rfc.invalid) {
    const path = v.path.map(fromHex);
    const run = v.kind === 'inclusion'
      ? verifyInclusion(fromHex(v.leaf_hash), v.leaf_index, v.tree_size, path, fromHex(v.root))
      : verifyConsistency(v.first, v.second, fromHex(v.first_root), fromHex(v.second_root), path);
    await assert.rejects(run, /./, `${v.kind} ${v.mutation}`);
  }
});

test('RFC 9162: mutations of each inclusion proof fail', async () => {
  const tree = rfc.trees[rfc.trees.length - 1];
  for (const v of tree.inclusion.filter((x) => x.path.length)) {
    const leaf = fromHex(tree.leaf_hashes[v.leaf_index]);
    const root = fromHex(tree.roots[String(v.tree_size)]);
    const path = v.path.map(fromHex);
    const flipped = path.map((p) => p.slice());
    flipped[0][0] ^= 1;
    for (const [index, size, p] of [[v.leaf_index + 1, v.tree_size, path], [v.leaf_index, v.tree_size * 2, path], [v.leaf_index, v.tree_size, flipped], [v.leaf_index, v.tree_size, path.slice(1)], [v.leaf_index, v.tree_size, [...path, path[0]]]]) {
      await assert.rejects(verifyInclusion(leaf, index, size, p, root));
    }
  }
});

const note = load('signed-note.json');

test('signed-note (golang.org/x/mod): vkeys parse, and their manglings do not', async () => {
  const peter = await parseVkey(note.vkeys.PeterNeumann);
  assert.equal(hex(peter.keyId), 'c74f20a3');
  for (const bad of note.bad_vkeys) await assert.rejects(parseVkey(bad));
  const b = note.vkeys.PeterNeumann;
  for (let i = 0; i < b.length; i++) {
    const mangled = b.slice(0, i) + String.fromCharCode(b.charCodeAt(i) + 1) + b.slice(i + 1);
    await assert.rejects(parseVkey(mangled), undefined, mangled);
  }
  for (let i = 1; i < b.length; i++) await assert.rejects(parseVkey(b.slice(0, i)));
});

test('signed-note (golang.org/x/mod): open verifies known keys and ignores unknown ones', async () => {
  const p = await parseVkey(note.vkeys.PeterNeumann);
  const e = await parseVkey(note.vkeys.EnochRoot);
  const peter = await noteVerifier(p.name, p.publicKey);
  const enoch = await noteVerifier(e.name, e.publicKey);
  const one = parseNote(Buffer.from(note.signed_both));
  assert.equal(one.text, note.text);
  assert.deepEqual((await openNote(one, [peter])).map((s) => s.name), ['PeterNeumann']);
  assert.deepEqual((await openNote(one, [peter, enoch])).map((s) => s.name), ['PeterNeumann', 'EnochRoot']);
  await assert.rejects(openNote(one, []), /no signature by a known key/);
  await assert.rejects(openNote(parseNote(note.invalid_signature), [peter]), /does not verify/);
  assert.throws(() => parseNote(note.too_many_signatures), /more than 100/);
  for (const bad of note.malformed) assert.throws(() => parseNote(Buffer.from(bad)), /./, JSON.stringify(bad));
  for (const bad of note.malformed_hex) assert.throws(() => parseNote(Uint8Array.from(Buffer.from(bad, 'hex'))), /UTF-8/);
});

test('transparency-dev witness vectors: the monkeys checkpoints open and are consistent', async () => {
  const m = load('transparency-dev-witness/monkeys.json');
  const v = await parseVkey(m.log_vkey);
  const log = await noteVerifier(v.name, v.publicKey);
  const o = await parseVkey(m.other_vkey);
  const other = await noteVerifier(o.name, o.publicKey);
  const init = parseNote(m.init);
  const next = parseNote(m.next);
  await openNote(init, [log]);
  await openNote(next, [log]);
  await assert.rejects(openNote(next, [other]));
  const a = parseCheckpoint(init.text);
  const b = parseCheckpoint(next.text);
  await verifyConsistency(a.size, b.size, a.root, b.root, m.proof_5_8_hex.map(fromHex));
  const bent = m.proof_5_8_hex.map(fromHex);
  bent[1][3] ^= 4;
  await assert.rejects(verifyConsistency(a.size, b.size, a.root, b.root, bent));
});

test('cosignature/v1 and the policy of the shipped sample (roots/)', async () => {
  const roots = new URL('../../roots/', import.meta.url);
  const policy = await parsePolicy(readFileSync(new URL('policy.txt', roots)));
  const proof = parseTlogProof(readFileSync(new URL('2026-11-04/2.tlog-proof', roots)));
  const ok = await checkCosignatures(proof.note, policy, 1793797200);
  assert.deepEqual([...ok.cosigned.keys()], ['sample-witness']);
  assert.equal(ok.failed.size, 0);
  const early = await checkCosignatures(proof.note, policy, 1793795705 - 61);
  assert.match(early.failed.get('sample-witness'), /more than 60 s after/);
  const text = proof.note.text.replace('\n7\n', '\n8\n');
  const moved = await checkCosignatures({ ...proof.note, text }, policy, 1793797200);
  assert.match(moved.failed.get('sample-witness'), /does not verify/);
});
