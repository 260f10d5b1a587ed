"""bursting"""
