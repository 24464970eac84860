// Entry point: wires the language client, the virtual documents and the palette commands
// (category "Fabric"). UI command ids use the `fabricLsp.` prefix because the language
// client registers the server's own `fabric.*` executeCommand ids itself.
import * as vscode from 'vscode';
import { Fabric, errorMessage } from './fabric';
import { fence } from './render';
import { VirtualDocuments } from './documents';
import { VIRTUAL_SCHEME } from './server';
import { RecallPicker } from './recall';
import { expandEntryCommand, openJsonlAt } from './expand';
import { Intents, previewCompaction } from './compaction';
import { pickSessionInfo } from './sessions';

let fabric: Fabric | undefined;

async function sessionsCommand(f: Fabric, intents: Intents): Promise<void> {
  const info = await pickSessionInfo(f, 'Fabric: Sessions');
  if (!info) return;
  const target = { session: info.sessionFile, sessionId: info.sessionId, label: info.sessionId };
  const action = await vscode.window.showQuickPick(
    ['Open JSONL', 'Preview Compaction', 'Recall in this session…', 'Request Compaction…', 'Compaction Status'],
    { title: `Fabric: session ${info.sessionId}`, placeHolder: 'What to do with this session' },
  );
  switch (action) {
    case 'Open JSONL': return openJsonlAt(info.sessionFile, 0);
    case 'Preview Compaction': return previewCompaction(f, false, target);
    case 'Recall in this session…': return new RecallPicker(f).inSession(info.sessionFile).run();
    case 'Request Compaction…': return intents.request(target);
    case 'Compaction Status': return intents.status(target);
    default: return undefined;
  }
}

/** `fabric.reload`: the server re-reads every configuration layer and drops its caches. */
async function reloadConfiguration(f: Fabric): Promise<void> {
  try {
    const effective = await f.request<Record<string, unknown>>('workspace/executeCommand', { command: 'fabric.reload', arguments: [] });
    const text = ['# Fabric: effective server configuration', '',
      `Workspace trusted: ${vscode.workspace.isTrusted}`, '', fence(JSON.stringify(effective, null, 2), 'json'), ''].join('\n');
    await f.docs.show('Fabric Configuration', 'configuration', text);
  } catch (err) {
    void vscode.window.showErrorMessage(`Fabric: reload failed: ${errorMessage(err)}`);
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel('Fabric', { log: true });
  const docs = new VirtualDocuments();
  const f = new Fabric(context, output, docs);
  fabric = f;
  const intents = new Intents(f);
  const command = (id: string, fn: (...args: unknown[]) => unknown) =>
    vscode.commands.registerCommand(id, fn);
  context.subscriptions.push(
    output,
    docs,
    intents,
    vscode.workspace.registerTextDocumentContentProvider(VIRTUAL_SCHEME, docs),
    command('fabricLsp.recall', (query?: unknown) => new RecallPicker(f).run(typeof query === 'string' ? query : undefined)),
    command('fabricLsp.previewCompaction', () => previewCompaction(f, false)),
    command('fabricLsp.previewCompactionWithInstructions', () => previewCompaction(f, true)),
    command('fabricLsp.expandEntry', (ref?: unknown) => expandEntryCommand(f, ref)),
    command('fabricLsp.sessions', () => sessionsCommand(f, intents)),
    command('fabricLsp.requestCompaction', () => intents.request()),
    command('fabricLsp.compactionStatus', () => intents.status()),
    command('fabricLsp.cancelCompaction', () => intents.cancel()),
    command('fabricLsp.reloadConfiguration', () => reloadConfiguration(f)),
    command('fabricLsp.restartServer', () => f.restart()),
    command('fabricLsp.showLog', () => output.show()),
  );
  void f.start();
}

export async function deactivate(): Promise<void> {
  const f = fabric;
  fabric = undefined;
  if (f) await f.dispose();
}
