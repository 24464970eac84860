// Load a session file with real Pi's own SessionManager and print what Pi builds from it:
// the leaf, the context message roles, the provider messages (convertToLlm) and Pi's token
// estimates. Usage: node pi_context.mjs <pi-package-dir> <session-file>
// Open a COPY: SessionManager.open migrates (rewrites) files whose header version is < 3.
import { pathToFileURL } from "node:url";
import { join, dirname, resolve } from "node:path";

const [pkgDir, file] = process.argv.slice(2);
const pi = await import(pathToFileURL(join(resolve(pkgDir), "dist/index.js")).href);
const sm = pi.SessionManager.open(resolve(file), dirname(resolve(file)));
const ctx = sm.buildSessionContext();
process.stdout.write(
  JSON.stringify({
    leaf: sm.getLeafId(),
    model: ctx.model ?? null,
    roles: ctx.messages.map((m) => m.role),
    messages: ctx.messages,
    llm: pi.convertToLlm(ctx.messages),
    est: ctx.messages.map((m) => pi.estimateTokens(m)),
  }) + "\n",
);
