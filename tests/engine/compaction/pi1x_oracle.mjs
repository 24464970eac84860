// Real Pi 1.x as an oracle for the host side of a preview under Pi 1.x's rules: for each
// request line on stdin ({file, leafId?, keepRecentTokens}) print Pi's own answer on stdout:
// the active path, prepareCompaction's result (undefined, or firstKeptEntryId / tokensBefore /
// isSplitTurn / message counts and roles), estimateProjectedContextTokens of the projection
// (Pi 1.x's tokensBefore) and the roles of the projected model context.
// Usage: node pi1x_oracle.mjs <pi-1.x-package-dir> < requests.jsonl
// Pi 1.x repairs a missing final newline when it opens a file: callers pass COPIES.
import { pathToFileURL } from "node:url";
import { join, dirname, resolve } from "node:path";
import { createInterface } from "node:readline";

const pkgDir = resolve(process.argv[2]);
const sm_mod = await import(pathToFileURL(join(pkgDir, "dist/core/session-manager.js")).href);
const comp = await import(pathToFileURL(join(pkgDir, "dist/core/compaction/compaction.js")).href);
const settingsMod = await import(pathToFileURL(join(pkgDir, "dist/core/settings-manager.js")).href);
const version = JSON.parse((await import("node:fs")).readFileSync(join(pkgDir, "package.json"), "utf8")).version;

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  const req = JSON.parse(line);
  let out;
  try {
    const sm = sm_mod.SessionManager.open(resolve(req.file), dirname(resolve(req.file)));
    if (req.leafId) sm.branch(req.leafId);
    const path = sm.getBranch();
    // With `agentDir`: Pi's own settings resolution (global settings.json + the project's
    // .pi/settings.json under `cwd`) for the session's model, as Pi does before it compacts.
    let settings = { enabled: true, reserveTokens: 16384, keepRecentTokens: req.keepRecentTokens };
    let model = null;
    if (req.agentDir) {
      const ctx = sm.buildSessionContext();
      model = ctx.model ? { provider: ctx.model.provider, id: ctx.model.modelId } : null;
      settings = settingsMod.SettingsManager.create(resolve(req.cwd || req.agentDir), resolve(req.agentDir)).getCompactionSettings(model || undefined);
    }
    const prep = comp.prepareCompaction(path, settings);
    const projection = sm.buildSessionProjection();
    out = {
      piVersion: version,
      leaf: sm.getLeafId(),
      ...(req.agentDir ? { settings, model: model ? `${model.provider}/${model.id}` : null } : {}),
      pathIds: path.map((e) => e.id),
      tokensBefore: comp.estimateProjectedContextTokens(projection, path).tokens,
      contextRoles: projection.messages.map((m) => m.role),
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
