// Runs the MCP conformance suite (@modelcontextprotocol/conformance) with the
// arguments given. Its CLI imports `globSync` from node's `fs`, which node 22
// has and node 20 does not: on node 20 it runs a copy whose import takes
// `globSync` from the `glob` package instead (nothing else changes).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const entry = join(dirname(require.resolve('@modelcontextprotocol/conformance/package.json')), 'dist', 'index.js');
let target = entry;
if (typeof fs.globSync !== 'function') {
  target = join(dirname(entry), 'index.node20.js');
  if (!existsSync(target)) {
    const source = readFileSync(entry, 'utf8');
    // The bundle's one import from "fs" names globSync under some short name.
    const from = /import\{([^}]*)\}from"fs";/.exec(source);
    const name = from && /(?:^|,)globSync as (\w+)(?:,|$)/.exec(from[1]);
    if (!name) {
      throw new Error('the conformance suite\'s fs import is not the one this runner knows');
    }
    const rest = from[1].split(',').filter((part) => !part.startsWith('globSync ')).join(',');
    const to = `import{${rest}}from"fs";import{globSync as ${name[1]}}from"glob";`;
    writeFileSync(target, source.replace(from[0], to));
  }
}
await import(pathToFileURL(target).href);
