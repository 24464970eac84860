// `vscode:prepublish` (run by `vsce package`, so also by `npm run package` and
// `npx @vscode/vsce package`): the production bundle, the server wheel and wheelhouse
// (scripts/bundle-server.mjs), and the repository's LICENSE next to package.json.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const ext = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
for (const script of [['esbuild.mjs', '--production'], ['scripts/bundle-server.mjs']]) {
  const res = spawnSync(process.execPath, script, { cwd: ext, stdio: 'inherit' });
  if (res.status !== 0) process.exit(res.status ?? 1);
}
fs.copyFileSync(path.join(ext, '..', '..', 'LICENSE'), path.join(ext, 'LICENSE'));
