// Binds the host's imports (toolhost:plugin, wit/) for the SDK. Import it
// once from the component's entry module, before the tools run:
//
//   import './sdk/component.js';
//   import { plugin } from './tools.js';
//   export const tools = plugin.exports();
//
// componentize-js resolves these `toolhost:plugin/...` specifiers to the
// component's imports; Node.js cannot, which is why tools live in a module
// of their own that tests import without this file.
import * as config from 'toolhost:plugin/config@0.2.0';
import * as log from 'toolhost:plugin/log@0.2.0';
import * as state from 'toolhost:plugin/state@0.2.0';
import { bind } from './toolhost.js';

bind({ config, log, state });
