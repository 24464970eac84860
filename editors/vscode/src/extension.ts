// Entry point: wires the language client, the virtual documents and the palette commands
// (category "Fabric"). UI command ids use the `fabricLsp.` prefix because the language
// client registers the server's own `fabric.*` executeCommand ids itself.
import * as vscode from 'vscode';
import { Fabric, errorMessage } from './fabric';
import { fence } from './render';
import { VirtualDocuments } from './documents';
import { VIRTUAL_SCHEME, commandResults, currentPiDirs, documentSelector, restrictedSettingIds } from './server';
import { piDirExists } from './agentDir';
import { Bridge } from './bridge';
import { selectServer } from './selectServer';
import { fileHistoryCommand, showFileHistory } from './fileHistory';
import { RecallPicker } from './recall';
import { expandEntryCommand, openJsonlAt } from './expand';
import { Intents, ShowPreview, previewCompaction } from './compaction';
import { choiceOf, pickSession } from './sessions';
import { RecallView } from './recallView';
import { RecallSearchView } from './recallSearchView';
import { SessionsTree, sessionOfNode } from './sessionsTree';
import { PlanView } from './planView';
import { CurrentSession } from './currentSession';
import { PiTimeline, openOperation, registerTimeline } from './timeline';
import { type ActivityEvent, type FileOperation, Method, type SessionInfo, isIndexComplete } from './protocol';

let fabric: Fabric | undefined;

async function sessionsCommand(f: Fabric, intents: Intents, show: ShowPreview, recall: RecallView): Promise<void> {
  const picked = await pickSession(f, 'Fabric: Sessions');
  if (!picked) return;
  const { info, title } = picked;
  const target = { session: info.sessionFile, sessionId: info.sessionId, label: title };
  const action = await vscode.window.showQuickPick(
    ['Open JSONL', 'Preview Compaction', 'Recall in this session…', 'Request Compaction…', 'Compaction Status'],
    { title: `Fabric: ${title}`, placeHolder: `What to do with session ${info.sessionId}` },
  );
  switch (action) {
    case 'Open JSONL': return openJsonlAt(info.sessionFile, 0);
    case 'Preview Compaction': return previewCompaction(f, false, target, show);
    case 'Recall in this session…': return new RecallPicker(f, (r, m, sc) => recall.showResult(r, m, sc)).inSession(info.sessionFile).run();
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
      `Workspace trusted: ${vscode.workspace.isTrusted}`, '',
      ...(vscode.workspace.isTrusted ? [] : [`Restricted Mode: only your user settings count for ${restrictedSettingIds().join(', ')}.`, '']),
      fence(JSON.stringify(effective, null, 2), 'json'), ''].join('\n');
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
  const recall = new RecallView(f);
  const searchBox = new RecallSearchView(recall);
  const sessions = new SessionsTree(f);
  const current = new CurrentSession(f);
  const target = (info: SessionInfo) => ({ session: info.sessionFile, sessionId: info.sessionId, label: sessions.titleOf(info) });
  const plan: PlanView = new PlanView(f, {
    request: (session, sessionId) => { void intents.request(choiceOf(session, sessionId)); },
    refresh: (session) => { void previewCompaction(f, false, { session, label: session }, show); },
  });
  const show: ShowPreview = async (result, inputs) => {
    await plan.show(result, inputs);
    current.remember(result);
  };
  // A tree action gets its row; a key binding (Enter in the Sessions view) gets nothing: the selected row.
  const withSession = (fn: (info: SessionInfo) => unknown) => (arg?: unknown) => {
    const info = sessionOfNode(arg) ?? (arg === undefined ? sessions.selectedSession() : undefined);
    return info ? fn(info) : undefined;
  };
  intents.onDidChange((session) => { sessions.forget(session); current.schedule(); });
  // Views that stay true: a commit changes the session (its plan, its row); the end of
  // background indexing completes answers that were partial.
  const timeline = new PiTimeline(f);
  const timelineRegistration = registerTimeline(f, timeline);
  if (timelineRegistration) context.subscriptions.push(timelineRegistration);
  context.subscriptions.push(timeline);
  intents.onDidCommit((session) => {
    if (plan.shownSession() === session) plan.refreshShown();
    void sessions.refresh();
    timeline.refresh();
  });
  f.onDidStart((client) => {
    context.subscriptions.push(client.onNotification(Method.activity, (e: ActivityEvent) => {
      f.showIndex(e);
      if (!isIndexComplete(e)) return;
      output.info('background indexing complete: refreshing partial answers');
      void sessions.refresh();
      void recall.refreshIfPartial();
      timeline.refresh();
    }));
  });
  const picker = () => new RecallPicker(f, (r, m, sc) => recall.showResult(r, m, sc));
  context.subscriptions.push(
    output,
    docs,
    intents,
    recall,
    searchBox,
    sessions,
    plan,
    current,
    vscode.workspace.registerTextDocumentContentProvider(VIRTUAL_SCHEME, docs),
    command('fabricLsp.recall', (query?: unknown) => picker().run(typeof query === 'string' ? query : undefined)),
    command('fabricLsp.previewCompaction', () => previewCompaction(f, false, undefined, show)),
    command('fabricLsp.previewCompactionWithInstructions', () => previewCompaction(f, true, undefined, show)),
    command('fabricLsp.expandEntry', (ref?: unknown) => expandEntryCommand(f, ref)),
    command('fabricLsp.sessions', () => sessionsCommand(f, intents, show, recall)),
    // Recall results view.
    // With a query (scripts, the walkthrough): that search. Else search as you type.
    command('fabricLsp.recallView.search', async (query?: unknown) => {
      if (typeof query === 'string') await recall.search(query, { reveal: true });
      else recall.searchLive();
    }),
    // The team database's sessions (docs/team.md): the Results view, scope team.
    command('fabricLsp.recallTeam', async (query?: unknown) => {
      recall.sessionScope = undefined;
      recall.teamMember = undefined;
      recall.scope = 'team';
      if (typeof query === 'string') await recall.search(query, { reveal: true });
      else recall.searchLive();
    }),
    command('fabricLsp.recallView.refresh', () => recall.refresh()),
    command('fabricLsp.recallView.scope', () => recall.chooseScope()),
    command('fabricLsp.recallView.useRegex', () => recall.toggleMode()),
    command('fabricLsp.recallView.useLiteral', () => recall.toggleMode()),
    command('fabricLsp.recallView.next', () => recall.step(1)),
    command('fabricLsp.recallView.previous', () => recall.step(-1)),
    command('fabricLsp.recallView.openAsText', () => recall.openAsText()),
    command('fabricLsp.recallView.clear', () => recall.clear()),
    command('fabricLsp.recallView.loadMore', () => recall.loadMore()),
    command('fabricLsp.recallView.searchSession', (file?: unknown) => typeof file === 'string' ? recall.searchSession(file) : undefined),
    command('fabricLsp.recallView.open', (node?: any) => node?.kind === 'entry' ? recall.open(node) : undefined),
    command('fabricLsp.recallView.openJsonl', (node?: any) => node?.kind === 'entry' ? recall.open(node, 'jsonl') : undefined),
    command('fabricLsp.recallView.openExpanded', (node?: any) => node?.kind === 'entry' ? recall.open(node, 'expanded') : undefined),
    // Sessions view.
    command('fabricLsp.sessionsView.refresh', () => sessions.reload()),
    command('fabricLsp.sessionsView.loadMore', () => sessions.loadMore()),
    command('fabricLsp.sessionsView.preview', withSession((info) => previewCompaction(f, false, target(info), show))),
    command('fabricLsp.sessionsView.recall', withSession(async (info) => {
      recall.sessionScope = info.sessionFile;
      await vscode.commands.executeCommand('fabricLsp.recallView.search');
    })),
    command('fabricLsp.sessionsView.openJsonl', withSession((info) => openJsonlAt(info.sessionFile, 0))),
    command('fabricLsp.sessionsView.request', withSession((info) => intents.request(target(info)))),
    command('fabricLsp.sessionsView.cancel', withSession((info) => intents.cancel(target(info)))),
    // Compaction plan view.
    command('fabricLsp.plan.openInEditor', () => plan.openPanel()),
    command('fabricLsp.plan.openMarkdown', () => plan.openMarkdown()),
    command('fabricLsp.fileHistory', (arg?: unknown) => fileHistoryCommand(f, arg)),
    command('fabricLsp.timeline.open', (op?: unknown, branches?: unknown, file?: unknown) =>
      op && typeof file === 'string' ? openOperation(f, op as FileOperation, typeof branches === 'string' ? branches : 'active', file) : undefined),
    command('fabricLsp.requestCompaction', () => intents.request()),
    command('fabricLsp.compactionStatus', () => intents.status()),
    command('fabricLsp.cancelCompaction', () => intents.cancel()),
    command('fabricLsp.reloadConfiguration', () => reloadConfiguration(f)),
    command('fabricLsp.restartServer', () => f.restart()),
    command('fabricLsp.selectServer', () => selectServer(f)),
    command('fabricLsp.showLog', () => output.show()),
  );
  commandResults.fileHistory = (result) => showFileHistory(f, result);
  context.subscriptions.push(new Bridge(f, () => documentSelector(currentPiDirs())));
  // VS Code has no activation event for "a directory in $HOME exists": the extension
  // activates after start-up, and starts its server only where Pi has been used (or when a
  // Fabric command, view, session JSONL or entry reference asks for it).
  const dirs = currentPiDirs();
  if (piDirExists(dirs)) {
    void f.start();
  } else {
    output.info(`no Pi agent dir at ${dirs.agentDir} (${dirs.source}): the server starts when a Fabric command or view is used`);
  }
}

export async function deactivate(): Promise<void> {
  const f = fabric;
  fabric = undefined;
  if (f) await f.dispose();
}
