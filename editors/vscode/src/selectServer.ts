// "Fabric: Select Server…": the bundled server (with a chosen Python), a fabric-lsp the
// user installed, or a fresh install of the bundled one. Writes user settings and restarts.
import * as vscode from 'vscode';
import type { Fabric } from './fabric';
import { MIN_PYTHON, coveredOffline, isSupported, listPythons, minorOf, probePython, supportedText } from './bundled';
import { fabricSetting } from './server';

type Choice = vscode.QuickPickItem & { run: () => Promise<boolean> };

async function setServer(command: string[] | undefined, python: string | null | undefined): Promise<void> {
  const cfg = vscode.workspace.getConfiguration('fabric');
  await cfg.update('server.command', command, vscode.ConfigurationTarget.Global);
  if (python !== undefined) await cfg.update('server.python', python, vscode.ConfigurationTarget.Global);
  const inspect = cfg.inspect<string[]>('server.command');
  // In Restricted Mode the workspace's value is ignored anyway (trust.ts).
  if (vscode.workspace.isTrusted && ((inspect?.workspaceValue?.length ?? 0) > 0 || (inspect?.workspaceFolderValue?.length ?? 0) > 0)) {
    void vscode.window.showWarningMessage('Fabric: this workspace sets fabric.server.command, which wins over the user setting.');
  }
}

async function browse(title: string): Promise<string | undefined> {
  const picked = await vscode.window.showOpenDialog({ title, canSelectMany: false, canSelectFolders: false, openLabel: 'Select' });
  return picked?.[0]?.fsPath;
}

export async function selectServer(fabric: Fabric): Promise<void> {
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  const configured = fabricSetting<string[]>('server.command', folder);
  const command = (Array.isArray(configured) ? configured : []).filter(Boolean);
  const python = fabricSetting<string | null>('server.python', folder) || undefined;
  const bundled = fabric.installer;
  const items: Choice[] = [];
  const pickPython = async (): Promise<boolean> => {
    const b = bundled?.bundle;
    const found = (await listPythons(folder, vscode.workspace.isTrusted)).filter((p) => isSupported(p.version));
    const rows: (vscode.QuickPickItem & { path?: string })[] = found.map((p) => ({
      label: `Python ${p.version}`,
      description: p.executable,
      detail: `${p.source} · ${coveredOffline(b, p) ? 'installs offline from the bundled wheels' : `not in the bundled wheels (${p.target ?? 'unknown platform'}): installs from the package index`}`,
      path: p.executable,
    }));
    rows.push({ label: '$(folder-opened) Browse…', description: 'an interpreter anywhere' });
    const row = await vscode.window.showQuickPick(rows, { title: `Fabric: the bundled server runs on ${supportedText(b)}` });
    if (!row) return false;
    const chosen = row.path ?? await browse('Python interpreter');
    if (!chosen) return false;
    const info = await probePython(chosen, 'chosen');
    if (!info || !isSupported(info.version)) {
      void vscode.window.showErrorMessage(`Fabric: ${chosen} is ${info ? `Python ${info.version}` : 'not a Python that runs'}; the bundled server runs on ${supportedText(b)} (at least ${MIN_PYTHON.join('.')}).`);
      return false;
    }
    if (b && !coveredOffline(b, info)) {
      void vscode.window.showWarningMessage(`Fabric: the bundled wheels do not cover Python ${minorOf(info.version)} on ${info.target ?? 'this platform'}; the server's dependencies will come from the package index.`);
    }
    await setServer(undefined, chosen);
    return true;
  };
  if (bundled) {
    items.push({
      label: '$(package) Bundled server',
      description: `fabric-lsp ${bundled.bundle.version}${command.length === 0 && !python ? ' (current)' : ''}`,
      detail: `Installed into the extension's storage with the first ${supportedText(bundled.bundle)} found (Python extension, PATH)`,
      run: async () => { await setServer(undefined, null); return true; },
    });
    items.push({
      label: '$(symbol-misc) Bundled server with a Python…',
      description: python ? `now ${python}` : undefined,
      detail: 'Choose the interpreter that installs and runs it (fabric.server.python)',
      run: pickPython,
    });
  }
  items.push({
    label: '$(terminal) A fabric-lsp I installed…',
    description: command.length ? `now ${command.join(' ')}` : undefined,
    detail: 'pipx / uv tool / pip install: choose its fabric-lsp executable (fabric.server.command)',
    run: async () => {
      const exe = await browse('fabric-lsp executable');
      if (!exe) return false;
      await setServer([exe], undefined);
      return true;
    },
  });
  if (bundled) {
    items.push({
      label: '$(refresh) Reinstall the bundled server',
      detail: 'Delete the installed copy and install it again',
      run: async () => {
        await fabric.stopClient();
        bundled.reset();
        return true;
      },
    });
  }
  const choice = await vscode.window.showQuickPick(items, { title: 'Fabric: Select Server', matchOnDetail: true });
  if (!choice) return;
  fabric.selecting = true;
  let restart = false;
  try {
    restart = await choice.run();
  } finally {
    // Configuration events arrive asynchronously after update() resolves.
    setTimeout(() => { fabric.selecting = false; }, 500);
  }
  if (restart) await fabric.restart();
}
