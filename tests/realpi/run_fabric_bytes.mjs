// Calls the extension's own runFabric (editors/pi/extensions/fabric.ts) with the command
// line given, and reports whether the big non-ASCII answer arrived intact.
const [extension, command, expectedFile] = process.argv.slice(2);
const { readFileSync } = await import("node:fs");
process.env.FABRIC_LSP_COMMAND = command;
const m = await import(extension);
const r = await m.runFabric("echo", { probe: true });
const expected = readFileSync(expectedFile, "utf8");
process.stdout.write(JSON.stringify({
  length: Buffer.byteLength(r.text, "utf8"),
  equal: r.text === expected,
  replacement: (r.text.match(/\uFFFD/g) || []).length,
}));
