"""The kernel-archive explorer (run it with ``kernel-archive serve``): builds the navigation, nothing else."""

import streamlit as st

from explorer import PAGES

st.set_page_config(page_title="kernel-archive", page_icon=":material/memory:", layout="wide")
st.navigation(
    [st.Page(p.script, title=p.title, icon=p.icon, url_path=p.url_path, default=p.default,
             visibility="visible" if p.in_menu else "hidden") for p in PAGES],
    position="top",
).run()
