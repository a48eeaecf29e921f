// The record lookup of `/` (decisions/38-explorer.md): fetch the record the page names, show its
// members, then check it here with the log's JavaScript verifier (/verify.js) against /keys,
// the head its anchor names, that head's tlog-proof and the witness policy, all from this
// origin, and show each check's verdict. The DOM is written with textContent only.
import { headLeafHash, verifyRecord } from "./verify.js";

const LIMIT = 4 * 1024 * 1024; // bytes of any one fetched document
const DEADLINE_MS = 10000;

async function fetchText(path, optional = false) {
  const response = await fetch(new URL(path, document.baseURI), {
    cache: "no-cache",
    signal: AbortSignal.timeout(DEADLINE_MS),
  });
  if (optional && response.status === 404) return undefined;
  if (!response.ok) throw new Error(`${path} answered HTTP ${response.status}`);
  const text = await response.text();
  if (text.length > LIMIT) throw new Error(`${path} is over ${LIMIT} bytes`);
  return text;
}

// The anchor's head on this origin: `<base>/roots/<day>[/<size>]` becomes `roots/<day>[/<size>]`.
function headPath(anchor) {
  const url = anchor && typeof anchor.url === "string" ? anchor.url : "";
  const found = /\/roots\/(\d{4}-\d{2}-\d{2}(?:\/\d{1,19})?)$/.exec(url);
  return found ? `roots/${found[1]}` : undefined;
}

function cell(row, tag, text, className) {
  const element = document.createElement(tag);
  element.textContent = text;
  if (className) element.className = className;
  row.appendChild(element);
  return element;
}

function showMembers(record) {
  const list = document.getElementById("record-members");
  list.replaceChildren();
  for (const [name, value] of Object.entries(record)) {
    cell(list, "dt", name);
    const code = document.createElement("code");
    code.className = "hash";
    code.textContent = typeof value === "string" ? value : JSON.stringify(value);
    cell(list, "dd", "").appendChild(code);
  }
}

function showChecks(result) {
  const table = document.getElementById("checks");
  const verdict = document.getElementById("verdict");
  if (result.error) throw new Error(result.error); // an input it could not read, as exit 2
  for (const check of result.checks) {
    const row = document.createElement("tr");
    row.dataset.check = check.name;
    row.dataset.status = check.status;
    cell(row, "td", check.name);
    cell(row, "td", check.status, check.status);
    cell(row, "td", check.detail);
    table.appendChild(row);
  }
  const failed = result.checks.filter((c) => c.status === "FAIL").map((c) => c.name);
  const skipped = result.checks.filter((c) => c.status === "SKIP").length;
  verdict.dataset.ok = String(result.ok);
  verdict.className = result.ok ? "PASS" : "FAIL";
  verdict.textContent = result.ok
    ? `Verified: no check failed${skipped ? ` (${skipped} skipped)` : ""}.`
    : `Not verified: ${failed.join(", ") || "a check"} failed.`;
}

async function evidence(record) {
  // What the verifier checks the record against; a piece it cannot have is left out, and the
  // verifier says which check that fails or skips.
  const [keys, policy] = await Promise.all([fetchText("keys"), fetchText("history/policy", true)]);
  const options = { keys: JSON.parse(keys), policy, at: Math.floor(Date.now() / 1000) };
  const path = headPath(record.anchor);
  try {
    options.head = path && (await fetchText(path, true));
    if (options.head) {
      const hash = await headLeafHash(options.head);
      options.tlogProof = await fetchText(`history/proof?leaf_hash=${hash}`, true);
    }
  } catch {
    // a head or proof that cannot be read: the verifier reports what is missing
  }
  return options;
}

async function main() {
  const section = document.getElementById("lookup");
  const verdict = document.getElementById("verdict");
  if (!section || !section.dataset.query || !verdict) return;
  verdict.textContent = "Checking…";
  try {
    const text = await fetchText(`record?${section.dataset.query}`);
    const record = JSON.parse(text);
    showMembers(record);
    // The text, not the object: the verifier reads its numbers exactly as served.
    showChecks(await verifyRecord(text, await evidence(record)));
  } catch (error) {
    verdict.className = "error";
    verdict.textContent = `Could not check the record: ${error.message}`;
  } finally {
    section.dataset.done = "true";
  }
}

main();
