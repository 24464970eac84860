// Workspace trust for settings. A workspace (or folder) value of a setting that names a
// path, a command, an interpreter or an environment is a choice the repository makes, not
// the user: in an untrusted workspace such a value is never used nor sent to the server.
// Which settings those are is said in ONE place, the manifest's
// `capabilities.untrustedWorkspaces.restrictedConfigurations` (VS Code reads it too); this
// module reads that list at run time. No `vscode` import: the unit tests load it directly.

/** What `WorkspaceConfiguration.inspect()` answers (the layers this extension reads). */
export interface Inspected<T = unknown> {
  defaultValue?: T;
  globalValue?: T;
  workspaceValue?: T;
  workspaceFolderValue?: T;
}

/**
 * The restricted settings of this extension, as ids without the `fabric.` prefix
 * (`server.command`, `indexDir`, …), read from its package.json.
 */
export function restrictedSettings(packageJSON: any): ReadonlySet<string> {
  const list = packageJSON?.capabilities?.untrustedWorkspaces?.restrictedConfigurations;
  if (!Array.isArray(list)) return new Set();
  return new Set(list.filter((id: unknown): id is string => typeof id === 'string' && id.startsWith('fabric.'))
    .map((id) => id.slice('fabric.'.length)));
}

/**
 * The value a setting has for this extension, without the default: the most specific of
 * folder, workspace and user values, except that a restricted setting in an untrusted
 * workspace has only its user (global) value. (VS Code itself already hides workspace
 * values of the settings the manifest declares restricted; this holds whatever VS Code
 * answers, e.g. a version or a host that does not, or a setting left off the list.)
 */
export function settingValue<T>(i: Inspected<T> | undefined, trusted: boolean, restricted: boolean): T | undefined {
  if (!i) return undefined;
  if (restricted && !trusted) return i.globalValue;
  return i.workspaceFolderValue ?? i.workspaceValue ?? i.globalValue;
}

/** Reads one setting (a key without the `fabric.` prefix) of the `fabric` section. */
export type Inspect = (key: string) => Inspected | undefined;

/**
 * The `fabric` configuration section as the server should see it: only values the user
 * actually set (so <agentDir>/fabric.json and .pi/fabric.json still apply underneath), a
 * restricted setting only from the user's own settings while the workspace is untrusted,
 * plus `trusted` from workspace trust.
 */
export function pickServerSettings(
  keys: readonly string[],
  inspect: Inspect,
  trusted: boolean,
  restricted: ReadonlySet<string>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const value = settingValue(inspect(key), trusted, restricted.has(key));
    if (value === undefined || value === null) continue;
    const parts = key.split('.');
    let node = out;
    for (const part of parts.slice(0, -1)) {
      if (typeof node[part] !== 'object' || node[part] === null) node[part] = {};
      node = node[part] as Record<string, unknown>;
    }
    node[parts[parts.length - 1]] = value;
  }
  out.trusted = trusted;
  return out;
}
