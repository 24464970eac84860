// Starts code-server (real VS Code workbench and Node extension host) on a free
// loopback port with a fresh profile, and stops its whole process group afterwards.
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function writeJson(file, value) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

/**
 * @param {object} o
 * @param {string} o.codeServer  path of the code-server launcher
 * @param {string} o.node        node 24 binary (code-server refuses other majors)
 * @param {string} o.root        temp directory for profile, extensions and logs
 * @param {string} o.vsix        the packaged extension
 * @param {object} o.settings    extra user settings
 * @param {object} [o.env]       environment overrides for code-server and its extension host
 *                               (a value of undefined removes the variable; PATH replaces
 *                               the inherited one, node's directory is still put first)
 */
export async function startCodeServer({ codeServer, node, root, vsix, settings, log, workspaceTrust = false, env: extraEnv = {} }) {
  const port = await freePort();
  const userData = path.join(root, 'ud');
  const extensions = path.join(root, 'ext');
  const home = path.join(root, 'home');
  fs.mkdirSync(home, { recursive: true });
  const userSettings = {
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.enableExperiments': false,
    // With trust on, a new folder opens in Restricted Mode without asking.
    'security.workspace.trust.enabled': workspaceTrust,
    'security.workspace.trust.startupPrompt': 'never',
    'security.workspace.trust.banner': 'always',
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
    'extensions.autoUpdate': false,
    'extensions.autoCheckUpdates': false,
    'chat.disableAIFeatures': true,
    'files.hotExit': 'off',
    'editor.hover.delay': 100,
    'editor.minimap.enabled': false,
    'window.commandCenter': false,
    'workbench.colorTheme': 'Default Light Modern',
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    'workbench.auxiliaryBar.defaultVisibility': 'hidden',
    ...settings,
  };
  // code-server is a remote window: machine-scoped settings are read from Machine/.
  writeJson(path.join(userData, 'User', 'settings.json'), userSettings);
  writeJson(path.join(userData, 'Machine', 'settings.json'), settings);
  const config = path.join(root, 'config.yaml');
  fs.writeFileSync(config, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);
  const env = {
    ...process.env,
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_DATA_HOME: path.join(home, '.local', 'share'),
    EXTENSIONS_GALLERY: '{"serviceUrl":""}',
    ...extraEnv,
  };
  env.PATH = `${path.dirname(node)}:${extraEnv.PATH ?? process.env.PATH}`;
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  const common = ['--config', config, '--user-data-dir', userData, '--extensions-dir', extensions];
  const t0 = Date.now();
  const install = spawnSync(codeServer, [...common, '--install-extension', vsix], {
    env, encoding: 'utf8', timeout: 120_000,
  });
  if (install.status !== 0) {
    throw new Error(`code-server --install-extension failed (${install.status ?? install.signal}):\n${install.stdout}\n${install.stderr}`);
  }
  log(`installed ${path.basename(vsix)} in ${Date.now() - t0} ms`);
  const out = fs.openSync(path.join(root, 'code-server.log'), 'w');
  const proc = spawn(codeServer, [
    ...common,
    '--disable-telemetry', '--disable-update-check',
    ...(workspaceTrust ? [] : ['--disable-workspace-trust']),
    '--disable-getting-started-override',
  ], { env, detached: true, stdio: ['ignore', out, out] });
  const stop = () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      try { process.kill(-proc.pid, 'SIGTERM'); } catch { /* already gone */ }
    }
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) {
      throw new Error(`code-server exited early (${proc.exitCode}):\n${fs.readFileSync(path.join(root, 'code-server.log'), 'utf8')}`);
    }
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (res.ok) break;
    } catch { /* not up yet */ }
    if (Date.now() > deadline) {
      stop();
      throw new Error('code-server did not answer /healthz within 60 s');
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  log(`code-server up on port ${port} after ${Date.now() - t0} ms`);
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    userData,
    extensions,
    async stop() {
      stop();
      const timer = setTimeout(() => { try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* gone */ } }, 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}
