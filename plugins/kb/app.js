// The component's entry: binds the host's imports, then exports the tools.
import '../sdk-js/component.js';
import { plugin } from './tools.js';

export const tools = plugin.exports();
