// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * The instance for Jupyter AI's agents: the user's setting *Instance* of
 * *Tool Terminals: Jupyter AI* (schema/jupyter-ai.json), sent to the server
 * (`PUT /tool-terminal/api/jupyter-ai`) when JupyterLab starts and whenever
 * it changes. Jupyter AI's personas whose terminals are tool terminals run
 * their commands there; without a choice, in the user's only running
 * instance.
 */

import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { EXTENSION_ID } from '../tokens';

/**
 * The plugin that sends the setting.
 */
export const jupyterAiPlugin: JupyterFrontEndPlugin<void> = {
  id: `${EXTENSION_ID}:jupyter-ai`,
  description:
    "Sends the tool instance you chose for Jupyter AI's agents to the server.",
  autoStart: true,
  requires: [ISettingRegistry],
  activate: (app: JupyterFrontEnd, registry: ISettingRegistry): void => {
    const send = async (
      settings: ISettingRegistry.ISettings
    ): Promise<void> => {
      const instance = (settings.composite.instance as string) ?? '';
      try {
        const { requestAPI } = await import('../api');
        const { toolTerminalSettings } = await import('../settings');
        const serverSettings = toolTerminalSettings(
          app.serviceManager.serverSettings
        );
        await requestAPI('jupyter-ai', serverSettings, {
          method: 'PUT',
          body: JSON.stringify({ instance: instance.trim() || null })
        });
      } catch (error) {
        // Agents off on this server (404), or no tool terminals here: the
        // setting has nothing to do.
        console.debug(
          'jupyter-tool-terminal: Jupyter AI instance not sent',
          error
        );
      }
    };
    void registry
      .load(jupyterAiPlugin.id)
      .then(settings => {
        void send(settings);
        settings.changed.connect(() => void send(settings));
      })
      .catch(error =>
        console.warn('jupyter-tool-terminal: Jupyter AI settings', error)
      );
  }
};
