#!/usr/bin/env node
import { main } from '../src/cli/main.ts';

const code = await main(process.argv.slice(2));
// `serve` keeps running until a signal; every other command ends here.
if (process.argv[2] !== 'serve' || code !== 0) process.exit(code);
