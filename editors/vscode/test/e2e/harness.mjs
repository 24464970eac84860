// The checks' harness shared by the e2e scripts that drive one code-server page: TAP-like
// `ok - …` / `not ok - …` lines with a screenshot of each failure, polling for a condition,
// the command palette, and the sidebar's views.
import * as path from 'node:path';

export function assert(cond, message) {
  if (!cond) throw new Error(message);
}

/** innerText with its no-break spaces as plain spaces. */
export const clean = (s) => String(s ?? '').replace(/\u00a0/g, ' ');

/**
 * A harness over the page `ui.page` (set it once the browser is up): `shotDir` receives
 * `vscode-<name>.png` pictures, `failDir` the failures' screenshots.
 */
export function harness({ shotDir, failDir, stepMs = 30_000 }) {
  const ui = { page: undefined, passed: 0, failed: 0 };

  /** Run one named check; true when it passed (a later check may depend on it). */
  ui.check = async (name, fn) => {
    const t0 = Date.now();
    try {
      await fn();
      ui.passed += 1;
      console.log(`ok - ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
      return true;
    } catch (err) {
      ui.failed += 1;
      console.log(`not ok - ${name}`);
      console.log(String(err?.stack ?? err).split('\n').map((l) => `#   ${l}`).join('\n'));
      if (ui.page) {
        const file = path.join(failDir, `${name.replace(/[^a-z0-9]+/gi, '-').slice(0, 80)}.png`);
        await ui.page.screenshot({ path: file }).catch(() => undefined);
        console.log(`#   screenshot: ${file}`);
        await ui.page.keyboard.press('Escape').catch(() => undefined);
      }
      return false;
    }
  };

  /** `fn()` → {ok, value} polled until ok (its value returned) or `stepMs` passed. */
  ui.until = async (what, fn) => {
    const deadline = Date.now() + stepMs;
    let last;
    while (Date.now() < deadline) {
      last = await fn().catch((e) => ({ error: String(e) }));
      if (last && last.ok) return last.value;
      await ui.page.waitForTimeout(250);
    }
    throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last).slice(0, 800)}`);
  };

  ui.shot = async (name) => {
    await ui.page.waitForTimeout(400);
    await ui.page.screenshot({ path: path.join(shotDir, `vscode-${name}.png`) });
  };

  /** Run a palette command by its title (retried: the palette may still be closing). */
  ui.runCommand = async (title) => {
    const page = ui.page;
    for (let attempt = 1; ; attempt += 1) {
      await page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: 5000 }).catch(() => page.keyboard.press('Escape'));
      await page.keyboard.press('F1');
      const input = page.locator('.quick-input-widget input');
      const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
      try {
        await input.waitFor({ state: 'visible', timeout: 5000 });
        await input.fill(`>${title}`, { timeout: 5000 });
        await row.waitFor({ state: 'visible', timeout: 5000 });
        await page.keyboard.press('Enter');
        return;
      } catch (err) {
        await page.keyboard.press('Escape');
        if (attempt >= 3) throw new Error(`command "${title}" not in the palette: ${err.message}`);
        await page.waitForTimeout(1000);
      }
    }
  };

  /** The pane (view) of the sidebar titled `title`, and the texts of its rows. */
  ui.pane = (title) => ui.page.locator('.part.sidebar .pane', { has: ui.page.locator('.pane-header', { hasText: title }) }).first();
  ui.rows = async (title) => (await ui.pane(title).locator('.monaco-list-row').allInnerTexts()).map(clean);

  return ui;
}
