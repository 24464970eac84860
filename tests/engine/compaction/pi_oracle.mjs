// Real Pi as an oracle for the host side of a preview: for each request line on stdin
// ({file, leafId?, keepRecentTokens, reserveTokens}, or {file, fromId, targetId} for /tree) print Pi's own answer on stdout:
// the active path's prepareCompaction result (undefined or firstKeptEntryId /
// tokensBefore / isSplitTurn / message counts) and estimateContextTokens of the context.
// Usage: node pi_oracle.mjs <pi-package-dir> < requests.jsonl
// Files are opened read-only through SessionManager.open on a COPY made by the caller.
import { pathToFileURL } from "node:url";
import { join, dirname, resolve } from "node:path";
import { createInterface } from "node:readline";

const pkgDir = resolve(process.argv[2]);
const pi = await import(pathToFileURL(join(pkgDir, "dist/index.js")).href);
const comp = await import(pathToFileURL(join(pkgDir, "dist/core/compaction/index.js")).href);

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  const req = JSON.parse(line);
  let out;
  try {
    const sm = pi.SessionManager.open(resolve(req.file), dirname(resolve(req.file)));
    if (req.targetId !== undefined) {
      // /tree navigation: what Pi would hand to session_before_tree
      const r = comp.collectEntriesForBranchSummary(sm, req.fromId, req.targetId);
      process.stdout.write(JSON.stringify({ entries: r.entries.map((e) => e.id), commonAncestorId: r.commonAncestorId ?? null }) + "\n");
      continue;
    }
    if (req.leafId) sm.branch(req.leafId);
    const path = sm.getBranch();
    const settings = { enabled: true, reserveTokens: req.reserveTokens, keepRecentTokens: req.keepRecentTokens };
    const prep = comp.prepareCompaction(path, settings);
    const ctx = sm.buildSessionContext();
    out = {
      leaf: sm.getLeafId(),
      pathIds: path.map((e) => e.id),
      tokensBefore: comp.estimateContextTokens(ctx.messages).tokens,
      prepared: prep
        ? {
            firstKeptEntryId: prep.firstKeptEntryId,
            tokensBefore: prep.tokensBefore,
            isSplitTurn: prep.isSplitTurn,
            messagesToSummarize: prep.messagesToSummarize.length,
            turnPrefixMessages: prep.turnPrefixMessages.length,
          }
        : null,
    };
  } catch (e) {
    out = { error: String(e && e.message ? e.message : e) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
